package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/serve"
)

func serveCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "serve.yaml to read (see serve.example.yaml); flags and " + serve.EnvPrefix + "* variables override it"},
	}
	// One flag per setting, each also read from its environment variable.
	var probe serve.Config
	for _, s := range probe.Settings() {
		flags = append(flags, &cli.StringFlag{Name: s.Flag, EnvVars: []string{s.Env}, Usage: s.Name + " (" + s.Kind + ")", Category: "settings"})
	}
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the compression API and the OpenAI/Anthropic proxy that compresses long conversations",
		Description: "Proxies POST /v1/chat/completions, POST /v1/responses, POST /v1/messages and GET /v1/models to the\n" +
			"configured upstreams, compressing conversations past compression.threshold with the registry's promoted\n" +
			"guideline (student → teacher → truncation); passes /v1/embeddings, /v1/completions and /v1/responses/compact\n" +
			"through; answers POST /v1/messages/count_tokens with the compressed size, and serves POST /v1/compress,\n" +
			"/metrics, /healthz and /readyz (every /v1 route also without /v1). SIGHUP reloads the guideline; SIGTERM\n" +
			"drains in-flight requests.",
		Flags:  flags,
		Action: serveRun,
		Subcommands: []*cli.Command{{
			Name:        "hash-key",
			Usage:       "read a client key from stdin and print the sha256:<hex> line to store in auth.key_hashes or keys_file",
			Description: "The key is read from stdin (not an argument) so it stays out of shell history and process lists.",
			Action: func(c *cli.Context) error {
				line, _ := bufio.NewReader(c.App.Reader).ReadString('\n')
				key := strings.TrimSpace(line)
				if key == "" {
					return badInput(errors.New("no key on stdin: pipe the key in, e.g. printf %s \"$KEY\" | optimize serve hash-key"))
				}
				fmt.Fprintln(c.App.Writer, serve.HashKey(key))
				return nil
			},
		}},
	}
}

func serveRun(c *cli.Context) error {
	if c.Args().Present() {
		return badInput(fmt.Errorf("unexpected argument %q: optimize serve takes only flags", c.Args().First()))
	}
	cfg := serve.Default()
	if path := c.String("config"); path != "" {
		var err error
		if cfg, err = serve.LoadConfig(path); err != nil {
			return badInput(err)
		}
	}
	for _, s := range cfg.Settings() {
		if c.IsSet(s.Flag) {
			if err := s.Set(c.String(s.Flag)); err != nil {
				return badInput(fmt.Errorf("--%s or %s: %w", s.Flag, s.Env, err))
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return badInput(fmt.Errorf("serve config: %w", err))
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return badInput(err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(c.Context, "tcp", cfg.Listen)
	if err != nil {
		return badInput(fmt.Errorf("listen: %w", err))
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() {
		signal.Stop(hup)
		close(hup)
	}()
	go func() {
		for range hup {
			if err := srv.Reload(); err != nil {
				slog.Warn("SIGHUP reload", "err", err)
			} else {
				slog.Info("SIGHUP reload done")
			}
		}
	}()
	return srv.Serve(c.Context, ln)
}
