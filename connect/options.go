package connect

import "go.temporal.io/sdk/client"

// Option adjusts the client options Dial builds, before it dials: the telemetry's
// interceptors and metrics handler (telemetry.Telemetry.ClientOptions), which every
// worker made from the client inherits.
type Option func(*client.Options)
