package workflows

// What the external tests (package workflows_test, which may import packages that import
// this one, such as examples/demo) use of the internal ones.
var (
	FixtureBlobs = fixtureBlobs
	FixtureType  = fixtureType
)
