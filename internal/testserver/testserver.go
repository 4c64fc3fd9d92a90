// Package testserver gives a test binary the MongoDB server it runs against: the one named
// by MONGODB_URI when that is set, or else the embedded server (FerretDB behind its
// write-serializing front, package embedded) run as a child process.
//
// The child is built without -race, so `go test -race` does not instrument FerretDB (which
// would make it several times slower) and its goroutines are not the test's. It is started
// with a pipe as its standard input and exits when the pipe closes, so it never outlives
// the test binary, even one that is killed. The child keeps its data in a temporary
// directory of its own, which it removes when it exits. The built binary stays until the
// Server closes, for Another; a killed test binary leaves it in the system's temporary
// directory.
//
// Use it from TestMain:
//
//	var srv *testserver.Server
//
//	func TestMain(m *testing.M) {
//		os.Exit(testserver.Main(m, &srv))
//	}
//
// Environment:
//
//	MONGODB_URI             run against this server instead of the embedded one
//	EXECSTORE_SERVER_BIN    run this embedded-server binary instead of building one (lets a
//	                        CI script build it once for all test packages)
//	EXECSTORE_SERVER_LOG=1  pass the embedded server's log through to standard error
package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
)

const (
	// serverPackage is the command run as the embedded server.
	serverPackage = "github.com/execstore/execstore/embedded/cmd/embedded-server"

	// serverTags leave FerretDB's PostgreSQL backend out of the server, which serves SQLite
	// only: a cold build compiles less.
	serverTags = "ferretdb_no_postgresql"

	// buildTimeout bounds building the server, with the wait for another test binary's
	// build of it. A build with a cold cache compiles FerretDB and SQLite: about two
	// minutes on a 2-core machine with nothing else to do, longer while `go test ./...`
	// compiles other packages alongside.
	buildTimeout = 10 * time.Minute

	// announceTimeout bounds the wait for the server's URI once it is built.
	announceTimeout = time.Minute

	// exitTimeout is how long Close waits for the server to exit before killing it.
	exitTimeout = 10 * time.Second

	// stderrTail is how much of the server's standard error an error message quotes.
	stderrTail = 4 << 10
)

// Server is the server a test binary runs against.
type Server struct {
	URI      string // the URI to test against
	BareURI  string // embedded only: FerretDB without the front; "" for an external server
	External bool   // true when MONGODB_URI was given

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer // nil when the log goes to os.Stderr
	tmpDir string      // holds the built binary; "" when EXECSTORE_SERVER_BIN gave one
	bin    string      // the embedded server's binary

	exited  chan struct{} // closed once the child has exited and been waited for
	waitErr error         // the child's exit status; read after exited is closed

	closeOnce sync.Once
	closeErr  error
}

// Start returns the server to test against. With MONGODB_URI set it returns that URI
// (External) and starts nothing. Otherwise it builds the embedded server without -race
// (the go command's build cache makes every build after the first fast) unless
// EXECSTORE_SERVER_BIN names one, starts it as a child process and returns once the child
// has printed its URIs. ctx bounds the start.
func Start(ctx context.Context) (*Server, error) {
	if uri := os.Getenv("MONGODB_URI"); uri != "" {
		return &Server{URI: uri, External: true}, nil
	}

	if bin := os.Getenv("EXECSTORE_SERVER_BIN"); bin != "" {
		return launch(ctx, bin, "")
	}

	tmpDir, err := os.MkdirTemp("", "execstore-testserver-*")
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	bin, err := build(ctx, tmpDir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(tmpDir))
	}
	s, err := launch(ctx, bin, tmpDir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(tmpDir))
	}
	return s, nil
}

// build compiles the embedded server into dir and returns the binary's path.
func build(ctx context.Context, dir string) (string, error) {
	goBin, err := goCommand()
	if err != nil {
		return "", fmt.Errorf("testserver: %w", err)
	}
	bin := filepath.Join(dir, "embedded-server")
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	unlock, err := lockBuild(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	out, err := exec.CommandContext(ctx, goBin, "build", "-tags", serverTags, "-o", bin, serverPackage).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return "", fmt.Errorf("testserver: go build %s: %w\n%s", serverPackage, err, out)
	}
	return bin, nil
}

// goCommand finds the go command. `go test` puts its own GOROOT/bin first on the test's
// PATH, so the server is built by the toolchain that builds the test.
func goCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, statErr := os.Stat(p); statErr == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("go command not found: %w", err)
}

// Another starts another embedded server from s's binary, a child process of its own like
// s, keeping its data in dir (which it leaves in place when it exits) and listening at addr
// ("127.0.0.1:0": a free port). A test that stops a server and starts it again on the same
// data and address uses it: the child is not built with -race, so it serves as fast as the
// test binary's own server. It fails for an external server.
func (s *Server) Another(ctx context.Context, dir, addr string) (*Server, error) {
	if s.External {
		return nil, errors.New("testserver: MONGODB_URI is set: no embedded server to start another of")
	}
	return launch(ctx, s.bin, "", "-dir", dir, "-addr", addr)
}

// launch starts the server binary bin with args and reads its URIs. tmpDir, when not "",
// is the directory bin was built in, removed by Close.
func launch(ctx context.Context, bin, tmpDir string, args ...string) (*Server, error) {
	s := &Server{tmpDir: tmpDir, bin: bin, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	if os.Getenv("EXECSTORE_SERVER_LOG") == "1" {
		s.cmd.Args = append(s.cmd.Args, "-log")
		s.cmd.Stderr = os.Stderr
	} else {
		s.stderr = &tailBuffer{max: stderrTail}
		s.cmd.Stderr = s.stderr
	}
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("testserver: start %s: %w", bin, err)
	}
	uris := make(chan map[string]string, 1)
	go func() {
		defer close(s.exited)
		// The child writes its two lines and nothing more; reading on to EOF makes
		// sure the pipe is drained before Wait closes it.
		found := make(map[string]string)
		sc := bufio.NewScanner(stdout)
		for len(found) < 2 && sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok && (k == "URI" || k == "BARE") {
				found[k] = v
			}
		}
		if len(found) == 2 {
			uris <- found
		}
		_, _ = io.Copy(io.Discard, stdout)
		s.waitErr = s.cmd.Wait()
	}()

	timer := time.NewTimer(announceTimeout)
	defer timer.Stop()
	select {
	case found := <-uris:
		s.URI, s.BareURI = found["URI"], found["BARE"]
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("testserver: the server exited before printing its URI (%v)%s", s.waitErr, s.stderrText())
	case <-timer.C:
		err = fmt.Errorf("testserver: the server printed no URI within %v", announceTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("testserver: waiting for the server's URI: %w", ctx.Err())
	}
	_ = s.stdin.Close()
	_ = s.cmd.Process.Kill()
	<-s.exited
	return nil, fmt.Errorf("%w%s", err, s.stderrText())
}

// RequireEmbedded skips t when the tests run against MONGODB_URI: for a test that needs what
// only the embedded server has (FerretDB without its front, the front itself, FerretDB's own
// answers, or an embedded server the test stops and starts, which a server named by a URI
// cannot be). why says which, and is the skip's reason.
func (s *Server) RequireEmbedded(t testing.TB, why string) {
	t.Helper()
	noteServerEnv()
	if s.External {
		t.Skip("MONGODB_URI is set: " + why)
	}
}

// Close stops the embedded server: it closes the child's standard input and waits for it
// to exit (killing it if it has not within a few seconds), which removes the child's data
// unless Another gave it a directory. It does nothing for an external server. Calls after the first return the first's result.
func (s *Server) Close() error {
	if s.External {
		return nil
	}
	s.closeOnce.Do(func() {
		_ = s.stdin.Close()
		timer := time.NewTimer(exitTimeout)
		defer timer.Stop()
		var err error
		select {
		case <-s.exited:
			if s.waitErr != nil {
				err = fmt.Errorf("testserver: the server exited with %w%s", s.waitErr, s.stderrText())
			}
		case <-timer.C:
			_ = s.cmd.Process.Kill()
			<-s.exited
			err = fmt.Errorf("testserver: the server did not exit within %v of its input closing; killed%s", exitTimeout, s.stderrText())
		}
		if s.tmpDir != "" {
			err = errors.Join(err, os.RemoveAll(s.tmpDir))
		}
		s.closeErr = err
	})
	return s.closeErr
}

// stderrText returns the end of the child's standard error, for an error message.
func (s *Server) stderrText() string {
	if s.stderr == nil {
		return " (its log went to standard error)"
	}
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return "; the end of its standard error:\n" + t
	}
	return ""
}

// tailBuffer is an io.Writer that keeps the last max bytes written to it.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Main is the body of a TestMain that needs a server: it starts one, stores it in *srv,
// runs the tests, closes the server and, when they passed, checks that no goroutine was left
// behind (goleak). It returns the exit code for os.Exit: 1 when the server cannot start or
// close or a goroutine leaked, else m.Run's.
func Main(m *testing.M, srv **Server) int {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout+announceTimeout)
	s, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*srv = s
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	return code
}

var (
	dbCounter     atomic.Int64
	unsafeDBChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)
	// runID tells this run's databases from an earlier run's on the same server: a server
	// MONGODB_URI names outlives the run, and not every test drops what it wrote.
	runID = strconv.FormatUint(uint64(time.Now().UnixNano())%(36*36*36*36*36*36), 36)
)

// Database returns a database name for t of its own, unique in the test binary and apart from
// other runs' on the same server: prefix, a counter, the run's id and t's name made safe,
// cut to 40 bytes (so that, with a short prefix, the name stays within the 63 bytes FerretDB
// and MongoDB allow).
func Database(t testing.TB, prefix string) string {
	noteServerEnv()
	name := unsafeDBChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s%d_%s_%s", prefix, dbCounter.Add(1), runID, name)
}

// noteServerEnv reads the variables that choose the server during the tests, where the go
// command's test cache records them: Start reads them in TestMain, before the tests, where
// it does not. Without this, a package's results on one server would be replayed from the
// cache as its results on another.
func noteServerEnv() {
	_ = os.Getenv("MONGODB_URI")
	_ = os.Getenv("EXECSTORE_SERVER_BIN")
}

// Collection returns database's collection at uri through a client of the test's own, closed
// when t ends: for reading and altering documents as a store would never write them.
func Collection(t testing.TB, uri, database, collection string) *mongo.Collection {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c.Database(database).Collection(collection)
}
