package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/internal/bytesize"
	"github.com/ctxopt/ctxopt/llm"
	"github.com/ctxopt/ctxopt/pipeline"
)

func cacheCommand() *cli.Command {
	where := []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "job file whose cache.path to use"},
		&cli.StringFlag{Name: "path", Usage: "cache file (default: the job's, else $CTXOPT_CACHE, else the user cache dir)"},
	}
	return &cli.Command{
		Name:  "cache",
		Usage: "inspect or prune the LLM response cache and the stage store beside it",
		Subcommands: []*cli.Command{
			{
				Name:  "stats",
				Usage: "entries, bytes and the hit rate of the last run",
				Flags: where,
				Action: func(c *cli.Context) error {
					path, err := cachePath(c)
					if err != nil {
						return err
					}
					st, err := llm.ReadCacheStats(path)
					if errors.Is(err, fs.ErrNotExist) {
						return badInput(fmt.Errorf("%w (no cache there yet: run a job first, or give --path or --config)", err))
					}
					if err != nil {
						return err
					}
					w := c.App.Writer
					fmt.Fprintf(w, "cache:    %s\n", st.Path)
					fmt.Fprintf(w, "file:     %s\n", bytesize.Format(st.FileBytes))
					fmt.Fprintf(w, "entries:  %d chat, %d embeddings (%s)\n", st.Entries["chat"], st.Entries["embed"], bytesize.Format(st.LiveBytes))
					if r := st.LastRun; r != nil {
						fmt.Fprintf(w, "last run: %d hits, %d misses, hit rate %.1f%%, %d evicted (closed %s)\n",
							r.Hits, r.Misses, 100*r.HitRate(), r.Evicted, r.Closed.Format(time.RFC3339))
					} else {
						fmt.Fprintln(w, "last run: none recorded")
					}
					n, b, err := pipeline.StageStoreStats(pipeline.StageStoreDir(path))
					if err != nil {
						return err
					}
					fmt.Fprintf(w, "stages:   %d stored stages (%s) in %s\n", n, bytesize.Format(b), pipeline.StageStoreDir(path))
					return nil
				},
			},
			{
				Name:  "prune",
				Usage: "delete old or least recently used entries, shrink the file, and bound the stage store",
				Flags: append(where,
					&cli.StringFlag{Name: "older-than", Usage: "delete cache entries and stored stages last used longer ago than `D` (e.g. 72h, 30d)"},
					&cli.StringFlag{Name: "max-size", Usage: "then evict least recently used entries until the file fits `S` (e.g. 500MB)"},
					&cli.StringFlag{Name: "stages-max-size", Usage: "then evict least recently used stored stages until the stage store fits `S` (e.g. 5GB)"},
				),
				Action: func(c *cli.Context) error {
					path, err := cachePath(c)
					if err != nil {
						return err
					}
					var age time.Duration
					if s := c.String("older-than"); s != "" {
						if age, err = parseAge(s); err != nil {
							return badInput(fmt.Errorf("--older-than: %w", err))
						}
					}
					size := func(flag string) (int64, error) {
						s := c.String(flag)
						if s == "" {
							return 0, nil
						}
						n, err := bytesize.Parse(s)
						if err != nil || n <= 0 {
							return 0, badInput(fmt.Errorf("--%s: want a positive size like 500MB, got %q", flag, s))
						}
						return n, nil
					}
					max, err := size("max-size")
					if err != nil {
						return err
					}
					stagesMax, err := size("stages-max-size")
					if err != nil {
						return err
					}
					if age == 0 && max == 0 && stagesMax == 0 {
						return badInput(fmt.Errorf("give --older-than, --max-size, --stages-max-size or several"))
					}
					if age > 0 || max > 0 {
						res, err := llm.PruneCache(path, age, max)
						if errors.Is(err, fs.ErrNotExist) {
							return badInput(err)
						}
						if err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "removed %d entries; file %s -> %s\n", res.Removed, bytesize.Format(res.BytesBefore), bytesize.Format(res.BytesAfter))
					}
					if age > 0 || stagesMax > 0 {
						res, err := pipeline.PruneStageStore(pipeline.StageStoreDir(path), age, stagesMax, time.Time{})
						if err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "stage store: removed %d stored stages and %d temporary directories of interrupted saves; %s -> %s\n",
							res.Removed, res.Temps, bytesize.Format(res.BytesBefore), bytesize.Format(res.BytesAfter))
					}
					return nil
				},
			},
		},
	}
}

func cachePath(c *cli.Context) (string, error) {
	if p := c.String("path"); p != "" {
		return p, nil
	}
	if cfg := c.String("config"); cfg != "" {
		job, err := pipeline.LoadJob(cfg)
		if err != nil {
			return "", badInput(err)
		}
		return pipeline.CachePath(job.Cache.Path), nil
	}
	return pipeline.CachePath(""), nil
}

// parseAge reads a Go duration or a number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive duration like 72h or 30d, got %q", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	age, err := time.ParseDuration(s)
	if err != nil || age <= 0 {
		return 0, fmt.Errorf("want a positive duration like 72h or 30d, got %q", s)
	}
	return age, nil
}
