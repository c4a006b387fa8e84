package api

// Scopes a gateway token can hold: read runs; operate them (start, resume, cancel,
// rerun); approve or deny what they wait for. The config validates gateway.tokens against
// them and the gateway grants them, so they are spelled here once.
const (
	ScopeRead    = "read"
	ScopeOperate = "operate"
	ScopeApprove = "approve"
)

// Scopes lists every gateway token scope.
var Scopes = []string{ScopeRead, ScopeOperate, ScopeApprove}
