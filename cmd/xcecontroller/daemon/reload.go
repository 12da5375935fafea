package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xce-hpc/xce/adapters/logging"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
)

// reloader is what SIGHUP re-reads without a restart (issue 8 build 6):
// the node's certificate, key and CA, and the log level of
// --log-level-file. A bad new file is an ERROR and changes nothing.
type reloader struct {
	cfg   Config
	tr    *transport.Transport
	level zap.AtomicLevel
	log   *zap.Logger
	now   func() time.Time
}

// reload runs both; the errors are logged (returned for tests).
func (r *reloader) reload() (tlsErr, levelErr error) {
	return r.reloadTLS(), r.reloadLevel()
}

// reloadTLS loads --cert, --key and --ca again and hands them to the
// transport, so every new connection uses them. The old material stays
// when a file is unreadable or invalid, the key does not match, the CA
// did not sign the certificate, it is for another name, or it has
// expired.
func (r *reloader) reloadTLS() error {
	mat, err := tlsconf.Load(r.cfg.Cert, r.cfg.Key, r.cfg.CA)
	if err == nil && tlsconf.Expired(mat.Leaf, r.now()) {
		msg, _ := tlsconf.ExpiryWarning(mat.Leaf, r.now(), 0)
		err = fmt.Errorf("the new %s", strings.TrimPrefix(msg, "Controller "))
	}
	if err == nil {
		err = r.tr.SetTLS(mat)
	}
	if err != nil {
		r.log.Error("SIGHUP: certificate not reloaded, the old one stays in use: "+err.Error(), zap.String("key", "tls.reload-failed"))
		return err
	}
	r.log.Info(fmt.Sprintf("SIGHUP: reloaded the certificate (serial %x, expires %s), key and CA from %s, %s, %s; new connections use them",
		mat.Leaf.SerialNumber, mat.Leaf.NotAfter.UTC().Format(time.RFC3339), r.cfg.Cert, r.cfg.Key, r.cfg.CA), zap.String("key", "tls.reloaded"))
	if msg, warn := tlsconf.ExpiryWarning(mat.Leaf, r.now(), tlsconf.CertWarnDays); warn {
		r.log.Warn(msg, zap.String("key", "tls.cert-expiry"))
	}
	return nil
}

// maxLevelFile bounds what is read of --log-level-file.
const maxLevelFile = 64

// readLevelFile is the level named in path: one of logging.Levels, with
// surrounding white space ignored.
func readLevelFile(path string) (zapcore.Level, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return 0, err
	} else if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLevelFile+1))
	if err != nil {
		return 0, err
	}
	if len(b) > maxLevelFile {
		return 0, fmt.Errorf("%s is longer than %d bytes", path, maxLevelFile)
	}
	lvl, err := logging.ParseLevel(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return lvl, nil
}

// errNoLevelFile: --log-level-file is not given.
var errNoLevelFile = errors.New("no --log-level-file")

// reloadLevel sets the log level from --log-level-file, if given.
func (r *reloader) reloadLevel() error {
	if r.cfg.LogLevelFile == "" {
		return errNoLevelFile
	}
	lvl, err := readLevelFile(r.cfg.LogLevelFile)
	if err != nil {
		r.log.Error(fmt.Sprintf("SIGHUP: log level stays %s: %v", r.level.Level(), err), zap.String("key", "log.level-failed"))
		return err
	}
	// Logged before the change, so that it shows when the new level is
	// higher.
	r.log.Info(fmt.Sprintf("SIGHUP: log level %s (was %s) from %s", lvl, r.level.Level(), r.cfg.LogLevelFile), zap.String("key", "log.level"))
	r.level.SetLevel(lvl)
	return nil
}
