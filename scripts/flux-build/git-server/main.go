// Command git-server serves the bare Git repositories under a directory over SSH, for the tests
// that run the real Flux source-controller (README.md holds the contract its callers rely on).
//
// It is github.com/fluxcd/gitkit's SSH server (the one github.com/fluxcd/pkg/gittestserver uses)
// with public-key authentication restricted to the keys of the --authorized-key files, a host key
// from --host-key (or a fresh one), and the system's git-upload-pack / git-receive-pack.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fluxcd/gitkit"
	"golang.org/x/crypto/ssh"
)

// version is set at build time (-X main.version=...) to a digest of this module's sources.
var version = "dev"

// fileList is a repeatable string flag.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("git-server: ")
	if err := run(); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run() error {
	var (
		listen   = flag.String("listen", "127.0.0.1:0", "TCP address to listen on (port 0: any free port)")
		root     = flag.String("root", "", "directory holding the bare repositories, as OWNER/REPO.git (required)")
		hostKey  = flag.String("host-key", "", "SSH host private key (OpenSSH or PEM); default: a fresh ed25519 key")
		user     = flag.String("user", "git", "the only SSH user name accepted")
		readOnly = flag.Bool("read-only", false, "refuse pushes (git-receive-pack closes the connection)")
		showVer  = flag.Bool("version", false, "print the version and exit")
		keyFiles fileList
	)
	flag.Var(&keyFiles, "authorized-key", "file of accepted public keys, authorized_keys format (repeatable; read again at each login)")
	flag.Parse()
	if *showVer {
		fmt.Println("git-server " + version)
		return nil
	}
	if *root == "" || flag.NArg() != 0 {
		flag.Usage()
		return errors.New("--root is required and no positional arguments are taken")
	}
	// Fail at start on an unreadable or malformed key file, rather than refusing every login later.
	if _, err := authorizedKeys(keyFiles); err != nil {
		return err
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		return err
	}

	// gitkit reads its host key from KEYDIR/gitkit.rsa (any key type ssh.ParsePrivateKey reads).
	keyDir, err := os.MkdirTemp("", "git-server-keys-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(keyDir)
	signer, err := writeHostKey(*hostKey, filepath.Join(keyDir, "gitkit.rsa"))
	if err != nil {
		return err
	}

	server := gitkit.NewSSH(gitkit.Config{
		Dir:      absRoot,
		KeyDir:   keyDir,
		GitUser:  *user,
		Auth:     true, // without it gitkit sets NoClientAuth and lets every client in
		ReadOnly: *readOnly,
	})
	server.PublicKeyLookupFunc = func(content string) (*gitkit.PublicKey, error) {
		keys, err := authorizedKeys(keyFiles)
		if err != nil {
			log.Printf("reading the authorized keys: %v", err)
			return nil, err
		}
		offered, _, _, _, err := ssh.ParseAuthorizedKey([]byte(content))
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if bytes.Equal(k.Marshal(), offered.Marshal()) {
				fp := ssh.FingerprintSHA256(offered)
				return &gitkit.PublicKey{Id: fp, Fingerprint: fp, Content: content}, nil
			}
		}
		log.Printf("refused public key %s", ssh.FingerprintSHA256(offered))
		return nil, errors.New("public key not authorized")
	}
	if err := server.Listen(*listen); err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	// Listen has read the host key: the directory goes now, not at exit, because the tests stop
	// this server with SIGKILL, which runs no deferred call (765 directories had piled up in
	// TMPDIR).
	_ = os.RemoveAll(keyDir)
	// The one line of stdout (README.md): address, then the host key as in known_hosts.
	fmt.Printf("listening %s %s\n", server.Address(), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
	os.Stdout.Sync()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		_ = server.Stop()
	}()
	if err := server.Serve(); err != nil && !errors.Is(err, os.ErrClosed) && !strings.Contains(err.Error(), "use of closed network connection") {
		return err
	}
	return nil
}

// writeHostKey copies the host key at from (or a fresh ed25519 key when from is empty) to to,
// and returns its signer.
func writeHostKey(from, to string) (ssh.Signer, error) {
	var pemBytes []byte
	if from != "" {
		b, err := os.ReadFile(from)
		if err != nil {
			return nil, fmt.Errorf("reading the host key: %w", err)
		}
		pemBytes = b
	} else {
		_, private, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := ssh.MarshalPrivateKey(private, "")
		if err != nil {
			return nil, err
		}
		pemBytes = pem.EncodeToMemory(block)
	}
	signer, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the host key: %w", err)
	}
	if err := os.WriteFile(to, pemBytes, 0o600); err != nil {
		return nil, err
	}
	return signer, nil
}

// authorizedKeys reads every public key of the given authorized_keys-format files (blank lines and
// # comments skipped).
func authorizedKeys(files []string) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	for _, file := range files {
		content, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(string(content), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
			}
			keys = append(keys, key)
		}
	}
	return keys, nil
}
