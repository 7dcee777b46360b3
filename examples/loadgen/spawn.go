package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// spawned is a server process loadgen started.
type spawned struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{} // closed once the process has exited
	err    error         // its exit status, once exited is closed
	out    *tail
}

// spawn starts the server binary on a free loopback port in mode, with the
// extra arguments after ours so that the user's flags win. A server's own
// -addr in extra would defeat the port choice, so it is refused.
func spawn(path, mode string, extra []string, log io.Writer) (*spawned, error) {
	for _, a := range extra {
		if a == "-addr" || a == "--addr" || len(a) > 6 && (a[:6] == "-addr=" || a[:7] == "--addr=") {
			return nil, errors.New("-spawn picks the server's address itself; drop -addr from the server arguments")
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &spawned{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan struct{}), out: &tail{max: 8 << 10}}
	args := append([]string{"-addr", s.addr, "-mode", mode}, extra...)
	s.cmd = exec.Command(path, args...)
	var w io.Writer = s.out
	if log != nil {
		w = io.MultiWriter(s.out, log)
	}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	return s, nil
}

// freePort asks the kernel for a free port. Another process could take it
// before the server binds it; the server then fails to start and says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls GET /healthz until it answers, the process exits or the
// timeout passes (opening the pool on a GPU takes a moment).
func (s *spawned) waitReady(ctx context.Context, d *driver, timeout time.Duration) (healthz, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		h, err := d.health(ctx)
		if err == nil {
			return h, nil
		}
		select {
		case <-s.exited:
			return h, fmt.Errorf("server exited before it was ready (%v); its last output:\n%s", s.err, s.out)
		case <-ctx.Done():
			return h, fmt.Errorf("server not ready after %v: %w; its last output:\n%s", timeout, err, s.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a graceful exit, killing the server if
// it takes longer than grace. clean reports a zero exit status.
func (s *spawned) stop(grace time.Duration) (clean bool, err error) {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, err
	}
	select {
	case <-s.exited:
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return false, fmt.Errorf("server still running %v after SIGTERM; killed. Its last output:\n%s", grace, s.out)
	}
	if s.err != nil {
		return false, fmt.Errorf("server exited with %v; its last output:\n%s", s.err, s.out)
	}
	return true, nil
}

// tail keeps the last max bytes written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
