package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/urfave/cli/v2"

	"github.com/ctxopt/ctxopt/rollout"
)

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print trajectory records in full, one JSON line each",
		ArgsUsage: "FILE|DIR",
		Description: "Reads a trajectories.jsonl FILE (or the rollout DIR holding one) of any record format and prints each\n" +
			"trajectory with every agent and compressor input as it was sent, for reading or jq. Records keep\n" +
			"their steps packed; see docs/trajectory-format.md.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "task", Usage: "print only the record of task `ID` (repeatable)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return badInput(fmt.Errorf("want a trajectories FILE or rollout DIR, got %d arguments", c.NArg()))
			}
			_, err := rollout.Show(c.App.Writer, c.Args().First(), c.StringSlice("task"))
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, rollout.ErrNoRecord) {
				return badInput(err)
			}
			return inputOr(err)
		},
	}
}
