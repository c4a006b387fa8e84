// Package dev gives a worker built on package platform the embedded Temporal server of
// `--dev` (package devserver: Temporal's server with SQLite, and its Web UI). It is the only
// part of the platform that links the Temporal server, so a worker that leaves it out of
// its options builds without it (and refuses --dev, saying so).
package dev

import (
	"context"
	"errors"
	"strconv"

	"github.com/nexo-temporal/nexo/devserver"
	"github.com/nexo-temporal/nexo/platform"
)

// Server is the option that lets a worker run with the embedded Temporal server: under
// platform.Main when --dev is given, under platform.New always.
func Server() platform.Option {
	return platform.WithDevServer(start)
}

func start(ctx context.Context, o platform.DevServerOptions) (platform.DevServer, error) {
	srv, err := devserver.Start(ctx, devserver.Options{
		IP:            o.IP,
		FrontendPort:  o.FrontendPort,
		UIPort:        o.UIPort,
		DBPath:        o.DBPath,
		Namespace:     o.Namespace,
		Logger:        o.Logger,
		CodecEndpoint: o.CodecEndpoint,
	})
	var pe *devserver.PortError
	if errors.As(err, &pe) {
		// The setting that chose the port, for the message (platform.PortError).
		key := map[string]string{devserver.ServiceFrontend: "dev.frontend_port", devserver.ServiceUI: "dev.ui_port"}[pe.Service]
		return nil, &platform.PortError{Key: key, Value: strconv.Itoa(pe.Port), Err: err}
	}
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return srv, nil
}
