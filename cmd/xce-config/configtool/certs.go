package configtool

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/adapters/tlsconf"
)

// The client certificates DevCerts writes, one per role besides the
// nodes' peer role (package authz): AdminCN is meant for --admin-cn;
// WorkerCN is a worker's (any CA-signed client that is not a peer, unless
// --client-cn lists the workers).
const (
	AdminCN  = "admin"
	WorkerCN = "worker"
)

// DevCerts writes a dev CA, one certificate per node name (the peer role;
// server+client, valid for hosts), an admin and a worker client
// certificate into dir: name.crt and name.key each, and ca.crt/ca.key.
func DevCerts(dir string, nodes, hosts []string, validFor time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	caCert, caKey, err := tlsconf.GenerateCA("xce dev CA", validFor)
	if err != nil {
		return err
	}
	if err := tlsconf.WriteFiles(dir, "ca", caCert, caKey); err != nil {
		return err
	}
	for _, n := range nodes {
		c, k, err := tlsconf.GenerateCert(caCert, caKey, n, hosts, validFor, true, true)
		if err != nil {
			return fmt.Errorf("certificate for %s: %w", n, err)
		}
		if err := tlsconf.WriteFiles(dir, n, c, k); err != nil {
			return err
		}
	}
	for _, n := range []string{AdminCN, WorkerCN} {
		c, k, err := tlsconf.GenerateCert(caCert, caKey, n, nil, validFor, true, false)
		if err != nil {
			return fmt.Errorf("%s certificate: %w", n, err)
		}
		if err := tlsconf.WriteFiles(dir, n, c, k); err != nil {
			return err
		}
	}
	return nil
}

func certsCmd() *cobra.Command {
	var dir string
	var nodes, hosts []string
	var days int
	c := &cobra.Command{
		Use:   "certs --dir D --node n0 --node n1 ...",
		Short: "write a dev CA and one certificate per role (PEM): each node (peer), admin (for --admin-cn) and worker",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := DevCerts(dir, nodes, hosts, time.Duration(days)*24*time.Hour); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote CA, %d node (peer) certificates, %s.crt (admin: start the nodes with --admin-cn %s) and %s.crt (worker) to %s\n",
				len(nodes), AdminCN, AdminCN, WorkerCN, filepath.Clean(dir))
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "certs", "output directory")
	c.Flags().StringSliceVar(&nodes, "node", nil, "node name (repeat)")
	c.Flags().StringSliceVar(&hosts, "host", []string{"127.0.0.1", "localhost"}, "IPs/DNS names in node certificates")
	c.Flags().IntVar(&days, "days", 365, "validity in days")
	return c
}
