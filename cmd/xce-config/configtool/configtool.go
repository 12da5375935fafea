// Package configtool is xce-config: YAML -> ClusterConfig blob, crash-safe
// install into a node's conf/, show and verify of a blob or conf/ dir, and
// dev certificates.
package configtool

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/xce-hpc/xce/buildinfo"
	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/confyaml"
	"github.com/xce-hpc/xce/sm"
)

// ErrVerify is returned by verify when conf/ does not check out.
var ErrVerify = errors.New("config verification failed")

// NewCommand builds the xce-config command tree.
func NewCommand(stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "xce-config",
		Short:         "xce cluster config tool: encode, install, show, verify, certs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.Version = buildinfo.Read().String()
	root.SetVersionTemplate(buildinfo.Template)
	root.AddCommand(encodeCmd(), installCmd(), showCmd(), verifyCmd(), certsCmd(), pushCmd())
	cliexit.Setup(root)
	return root
}

func encodeCmd() *cobra.Command {
	var in, out string
	c := &cobra.Command{
		Use:   "encode --config cluster.yaml --out cluster.bin",
		Short: "encode cluster.yaml into a ClusterConfig blob",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			blob, err := EncodeFile(in)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(blob)
				return err
			}
			if err := os.WriteFile(out, blob, 0o600); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			sum := sha256.Sum256(blob)
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d bytes, tag %016x, sha256 %s\n", out, len(blob), sm.Tag(sum), hex.EncodeToString(sum[:]))
			return nil
		},
	}
	c.Flags().StringVar(&in, "config", "cluster.yaml", "YAML config to encode")
	c.Flags().StringVar(&out, "out", "-", "blob output file (- = stdout)")
	return c
}

// EncodeFile reads, validates and encodes a cluster.yaml.
func EncodeFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := confyaml.Parse(path, data)
	if err != nil {
		return nil, err
	}
	if c.GetConfigGeneration() == 0 {
		c.ConfigGeneration = 1 // seed 002 §4.4: 1 on first save
	}
	return schema.Encode(c)
}

func installCmd() *cobra.Command {
	var workdir, name, config, blobFile string
	var keepN int
	c := &cobra.Command{
		Use:   "install --workdir W --name N --config cluster.yaml",
		Short: "install a config into ${workdir}/${name}/conf crash-safely (the daemon's own save sequence)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var blob []byte
			var err error
			switch {
			case blobFile != "":
				blob, err = os.ReadFile(blobFile)
			default:
				blob, err = EncodeFile(config)
			}
			if err != nil {
				return err
			}
			base := filepath.Join(workdir, name)
			if err := Install(base, name, keepN, blob); err != nil {
				if blobFile != "" {
					return fmt.Errorf("--blob %s: %w", blobFile, err)
				}
				return err
			}
			sum := sha256.Sum256(blob)
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s into %s/conf (tag %016x)\n", sm.VersionName(sum), base, sm.Tag(sum))
			return nil
		},
	}
	c.Flags().StringVar(&workdir, "workdir", "", "controller work directory")
	c.Flags().StringVar(&name, "name", "", "controller name (its --peers name)")
	c.Flags().StringVar(&config, "config", "cluster.yaml", "YAML config to install")
	c.Flags().StringVar(&blobFile, "blob", "", "install an already encoded blob instead of --config")
	c.Flags().IntVar(&keepN, "conf-keep-n", 2, "versioned config files to keep")
	_ = c.MarkFlagRequired("workdir")
	_ = c.MarkFlagRequired("name")
	return c
}

func showCmd() *cobra.Command {
	var stale time.Duration
	c := &cobra.Command{
		Use:   "show <blob file | conf dir | node dir>",
		Short: "show a config blob or a node's conf/ as YAML with its tag, SHA-256, generation and staleness",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := Inspect(args[0], stale, time.Now())
			if err != nil {
				return err
			}
			return info.Print(cmd.OutOrStdout())
		},
	}
	c.Flags().DurationVar(&stale, "conf-stale-timeout", 24*time.Hour, "flag configs older than this (0 disables)")
	return c
}

func verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify <conf dir | node dir>",
		Short: "check conf/current and the SHA-256 of the file it names; exit status 1 on failure",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := Inspect(args[0], 0, time.Now())
			if err != nil {
				return fmt.Errorf("%w: %w", ErrVerify, err)
			}
			if info.Pointer == "" {
				return fmt.Errorf("%w: %s is a blob, not a conf/ directory", ErrVerify, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: conf/current -> %s, sha256 %s, tag %016x\n", info.Pointer, info.SHA256, info.Tag)
			return nil
		},
	}
}
