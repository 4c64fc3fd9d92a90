// Package cpuhog keeps a machine's cores busy while a load test runs: child processes, one
// per core by default, each a busy loop. A hog is bounded: it ends by itself at its
// deadline, when its standard input reaches EOF (the parent closed it, or died), and on
// Linux when its parent dies (the kernel kills it). Stop kills every hog and waits for it.
//
// The hogs are the caller's binary started again: the caller gives the command, and the
// started binary calls Spin when Child reports that it was started as a hog. A test binary
// does it from a test function run alone (-test.run), the bench from main.
package cpuhog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"
)

// envUntil is the environment variable a hog is started with: its deadline, in Unix
// nanoseconds.
const envUntil = "EXECSTORE_CPUHOG_UNTIL"

// Hogs are running hog processes.
type Hogs struct {
	procs []*hog
	done  chan struct{} // closed once every hog exited
}

type hog struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// Start starts n hogs (runtime.NumCPU() when n ≤ 0), each running the command newCmd
// returns, which must be a binary that calls Spin when Child is true. Each ends by itself
// after d. On an error it stops those it started.
func Start(n int, d time.Duration, newCmd func() *exec.Cmd) (*Hogs, error) {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	until := strconv.FormatInt(time.Now().Add(d).UnixNano(), 10)
	h := &Hogs{}
	for range n {
		cmd := newCmd()
		cmd.Env = append(cmd.Environ(), envUntil+"="+until)
		dieWithParent(cmd)
		stdin, err := cmd.StdinPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			h.Stop()
			return nil, fmt.Errorf("cpuhog: %w", err)
		}
		p := &hog{cmd: cmd, stdin: stdin, done: make(chan struct{})}
		go func() {
			_ = cmd.Wait()
			close(p.done)
		}()
		h.procs = append(h.procs, p)
	}
	h.done = make(chan struct{})
	go func() {
		for _, p := range h.procs {
			<-p.done
		}
		close(h.done)
	}()
	return h, nil
}

// Done is closed once every hog exited, by itself or stopped.
func (h *Hogs) Done() <-chan struct{} { return h.done }

// Len is the number of hogs started.
func (h *Hogs) Len() int { return len(h.procs) }

// Stop kills every hog and waits for it to exit. It may be called more than once.
func (h *Hogs) Stop() {
	for _, p := range h.procs {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Kill()
	}
	for _, p := range h.procs {
		<-p.done
	}
}

// Child reports whether this process was started as a hog.
func Child() bool { return os.Getenv(envUntil) != "" }

// Spin is a hog's body: it keeps one core busy until its deadline passes or its standard
// input reaches EOF, and returns. It returns at once in a process that is not a hog.
func Spin() error {
	ns, err := strconv.ParseInt(os.Getenv(envUntil), 10, 64)
	if err != nil {
		return errors.New("cpuhog: not started as a hog")
	}
	until := time.Unix(0, ns)
	runtime.GOMAXPROCS(1) // one core: the reader of stdin runs when the loop yields
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	var x uint64
	for i := uint64(0); ; i++ {
		x = x*6364136223846793005 + 1442695040888963407 // work the compiler cannot drop
		if i%(1<<16) != 0 {
			continue
		}
		select {
		case <-eof:
			return nil
		default:
		}
		if time.Now().After(until) {
			runtime.KeepAlive(x)
			return nil
		}
	}
}
