# The Nexo image: the worker and the starter (whose `serve` is the gateway), static, on
# an empty base. docker-compose.temporal.yml builds it for its worker and gateway services:
#
#   docker compose -f docker-compose.temporal.yml build
#
# Two stages: the first compiles with the Go toolchain image, the second holds nothing but
# the two binaries and the CA certificates (TLS to Temporal Cloud, model providers, s3://).
# The binaries are built with CGO_ENABLED=0 (the embedded dev server's SQLite is pure Go),
# so they run FROM scratch; e2e/image_test.go checks exactly that against a local engine.
#
# The image runs as uid 65532 (no root) in /data, the volume the compose file shares
# between worker and gateway (artifacts.url and sandbox.root point there).

ARG GO_VERSION=1.27.3

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/starter ./starter \
 && mkdir -p /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/worker /out/starter /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV NEXO_ARTIFACTS_URL=file:///data/artifacts \
    NEXO_SANDBOX_ROOT=/data/workspaces \
    NEXO_MCP_CREDENTIALS_FILE=/data/mcp-credentials.json
ENTRYPOINT ["/usr/local/bin/worker"]
