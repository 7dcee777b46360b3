// Command server is an inference-style HTTP server whose two request
// classes are fcsp tenants sharing one GPU: POST /v1/interactive runs a
// small chain kernel, POST /v1/batch a large one. -mode picks how they
// share it: shared (every SM, no limits), ratelimit (every SM, the batch
// tenant's launch rate limited) or partitioned (the interactive tenant gets
// SMs of its own, the batch tenant the rest, rate limited). Memory quotas
// apply in every mode: an over-quota request gets 429 with the reason. A
// request's work is capped by default: its body, one JSON object with
// nothing after it, may ask for n up to 16 times the class's n
// (-<class>-max-n raises or lowers that), and its class's deadline
// (-<class>-timeout) bounds the whole request, the wait for its kernel
// included (503 past it).
//
// GET /healthz says the mode and device; GET /metrics serves Prometheus
// metrics (per tenant memory, SMs, launches, throttling; per class latency,
// and the queued and running requests and memory use that the Gateway API
// Inference Extension's model-server protocol asks of a model server, so an
// inference gateway can route each class across replicas: metrics.go).
// Behind an inference gateway, -objective premium=interactive serves the
// requests whose endpoint picker passed the objective "premium"
// (x-llm-d-inference-objective, or the older x-gateway-inference-objective)
// in the interactive class, whichever route they came by.
// SIGINT or SIGTERM shuts it down gracefully.
//
//	go run ./examples/server                                  # partitioned, the GPU or else the simulated H200
//	go run ./examples/server -mode shared -addr 127.0.0.1:9000
//	go run ./examples/server -simulate -interactive-n 4096 -interactive-steps 16 -batch-n 65536 -batch-steps 16
//	go run ./examples/server -config server.json -mode ratelimit   # flags override the file
//	go run ./examples/server -objective premium=interactive,bulk=batch
//	curl -X POST 127.0.0.1:8080/v1/interactive                     # or -d '{"n": 8192}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	if err := run(ctx, cfg, ln); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}
