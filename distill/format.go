package distill

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Format is a dataset file format: one file per split, written row by row.
// Each format registers itself in an init function (RegisterFormat), so
// adding one is a file and its test; the Writer writes every registered
// format and the dataset card lists them.
type Format interface {
	// Path is the file of a split, relative to the dataset directory.
	Path(split string) string
	// Open starts the file of a split on w.
	Open(w io.Writer, split string, opts WriterOptions) (RowWriter, error)
}

// RowWriter writes the rows of one split in one format.
type RowWriter interface {
	// Write adds a row, already checked (checkRow).
	Write(r *Row) error
	// Close writes what is pending (a footer); it does not close w.
	Close() error
}

// FormatInfo registers a format.
type FormatInfo struct {
	// Name selects the format (WriterOptions.Formats).
	Name string
	// Description says what the files hold, for the card's file table.
	Description string
	// Config is the 🤗 datasets configuration that reads the files, or
	// empty. Every configuration must name files of one format (see the
	// card), so a format with a configuration has it alone.
	Config string
	// Order places the format in the card's listing (lower first).
	Order  int
	Format Format
}

var formats = struct {
	sync.RWMutex
	m map[string]FormatInfo
}{m: map[string]FormatInfo{}}

// RegisterFormat adds a format. It panics on a second format of the same
// name or configuration, which is a programming error found at start-up.
func RegisterFormat(info FormatInfo) {
	formats.Lock()
	defer formats.Unlock()
	if info.Name == "" || info.Format == nil {
		panic("distill: RegisterFormat: a format needs a name and an implementation")
	}
	for _, f := range formats.m {
		if f.Name == info.Name || info.Config != "" && f.Config == info.Config {
			panic(fmt.Sprintf("distill: format %q registered twice (name or configuration of %q)", info.Name, f.Name))
		}
	}
	formats.m[info.Name] = info
}

// Formats returns the registered formats in listing order.
func Formats() []FormatInfo {
	formats.RLock()
	defer formats.RUnlock()
	list := make([]FormatInfo, 0, len(formats.m))
	for _, f := range formats.m {
		list = append(list, f)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Order != list[j].Order {
			return list[i].Order < list[j].Order
		}
		return list[i].Name < list[j].Name
	})
	return list
}

// selectFormats returns the formats named, in listing order, or all of
// them when names is empty.
func selectFormats(names []string) ([]FormatInfo, error) {
	all := Formats()
	if len(names) == 0 {
		return all, nil
	}
	var list []FormatInfo
	for _, n := range names {
		if !slices.ContainsFunc(all, func(f FormatInfo) bool { return f.Name == n }) {
			return nil, fmt.Errorf("unknown dataset format %q (registered: %s)", n, formatNames(all))
		}
	}
	for _, f := range all {
		if slices.Contains(names, f.Name) {
			list = append(list, f)
		}
	}
	return list, nil
}

func formatNames(list []FormatInfo) string {
	names := make([]string, len(list))
	for i, f := range list {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
