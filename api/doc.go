// Package api is the wire contract of Nexo on Temporal: the names that cross process
// boundaries (workflow types, signals, queries, search attributes, activity names), the
// request and result structs they carry, the run record, the statuses, and the error
// types. It imports the standard library only, so every room may depend on it and a
// change here is a change to the contract.
package api
