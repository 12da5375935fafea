package main

// A throwaway PostgreSQL for River: initdb in a temp dir, the server on a
// unix socket in that dir only (no TCP port to collide with), stopped and
// removed by stop, whatever happened before.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const pgPort = 5432 // names the socket file in our private socket dir only

type postgres struct {
	dir     string // removed by stop
	binDir  string
	version string
	cmd     *exec.Cmd
	exited  chan struct{}
	cred    *syscall.Credential // nil unless we run as root
}

// pgBinDir finds a directory holding initdb and postgres: PATH first,
// then /usr/lib/postgresql/<newest>/bin. As root with neither, it installs
// Debian's postgresql package.
func pgBinDir(ctx context.Context) (string, error) {
	find := func() string {
		if p, err := exec.LookPath("initdb"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			d := filepath.Dir(p)
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				return d
			}
		}
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d
			}
		}
		return ""
	}
	if d := find(); d != "" {
		return d, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin; install Debian's postgresql package")
	}
	fmt.Fprintln(os.Stderr, "bench-peers: installing Debian's postgresql package")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "postgresql"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	if d := find(); d != "" {
		return d, nil
	}
	return "", errors.New("postgresql installed, but still no initdb in /usr/lib/postgresql/*/bin")
}

// pgMajor is the version number in /usr/lib/postgresql/<major>/bin (0 if none).
func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// pgCredential: postgres refuses to run as root, so as root the server
// runs as the postgres system user (created if missing).
func pgCredential(ctx context.Context) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		out, aerr := exec.CommandContext(ctx, "useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres").CombinedOutput()
		if aerr != nil {
			return nil, fmt.Errorf("no postgres user (%v) and useradd failed: %w\n%s", err, aerr, out)
		}
		if u, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("postgres user after useradd: %w", err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// startPostgres initialises and starts a server; on error nothing is
// left behind. Settings are initdb's defaults (fsync and synchronous
// commit on, like xce's durable acknowledgements) but for the
// connection limit.
func startPostgres(ctx context.Context, maxConns int) (_ *postgres, err error) {
	bin, err := pgBinDir(ctx)
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "xce-bench-peers-pg-")
	if err != nil {
		return nil, err
	}
	pg := &postgres{dir: dir, binDir: bin, cred: cred}
	defer func() {
		if err != nil {
			pg.stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	out, err := pg.command(ctx, "postgres", "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("postgres --version: %w\n%s", err, out)
	}
	pg.version = strings.TrimSpace(string(out))
	initdb := pg.command(ctx, "initdb", "-D", pg.data(), "-U", "bench", "--auth=trust", "-E", "UTF8", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	logf, err := os.Create(pg.logPath())
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if cred != nil {
		if err := logf.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	// Not CommandContext: stop ends it gently, after the context is gone.
	pg.cmd = pg.command(context.Background(), "postgres", "-D", pg.data(), "-k", dir, "-p", strconv.Itoa(pgPort),
		"-c", "listen_addresses=", "-c", "max_connections="+strconv.Itoa(maxConns))
	pg.cmd.Stdout, pg.cmd.Stderr = logf, logf
	if err := pg.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	pg.exited = make(chan struct{})
	go func() { _ = pg.cmd.Wait(); close(pg.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, pg.connString())
		if err == nil {
			_ = conn.Close(ctx)
			return pg, nil
		}
		select {
		case <-pg.exited:
			return nil, fmt.Errorf("postgres exited at start:\n%s", pg.logTail())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres not accepting connections within 30 s (%v):\n%s", err, pg.logTail())
		}
	}
}

func (pg *postgres) data() string    { return filepath.Join(pg.dir, "data") }
func (pg *postgres) logPath() string { return filepath.Join(pg.dir, "postgres.log") }

// connString reaches the server over its socket as the initdb superuser.
func (pg *postgres) connString() string {
	return fmt.Sprintf("host=%s port=%d user=bench dbname=postgres sslmode=disable", pg.dir, pgPort)
}

// command runs one of the server's binaries as the server's user; the
// child is killed if this process dies first.
func (pg *postgres) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(pg.binDir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Dir = pg.dir
	return cmd
}

func (pg *postgres) logTail() string {
	b, _ := os.ReadFile(pg.logPath())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop shuts the server down (fast shutdown, SIGKILL after 20 s) and
// removes its directory.
func (pg *postgres) stop() {
	if pg.cmd != nil && pg.cmd.Process != nil {
		_ = pg.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-pg.exited:
		case <-time.After(20 * time.Second):
			_ = pg.cmd.Process.Kill()
			<-pg.exited
		}
	}
	if err := os.RemoveAll(pg.dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench-peers: remove %s: %v\n", pg.dir, err)
	}
}
