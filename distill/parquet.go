package distill

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Rows are written to Parquet by the encoder in this file, not by
// parquet-go's writer: Row's schema is fixed, so each column's pages are
// built straight from the rows, every string copied once, into the page that
// is compressed. parquet-go's writer takes each value through reflection and
// two intermediate buffers (and statistics of every page), which cost a third
// of an export's CPU besides compression; the export benchmark (make bench)
// measures the difference. parquet-go still provides the format: the
// schema (derived from Row's tags), the Thrift structures and their encoding,
// the RLE encodings, and the readers, which read these files back in the
// tests.

const parquetMagic = "PAR1"

// parquetCreatedBy is the footer's created_by, in the "NAME version VERSION
// (build BUILD)" form readers parse.
const parquetCreatedBy = "ctxopt version 1 (build distill)"

// Leaf columns of Row's Parquet schema, in schema order (checked against
// the schema in TestRowColumns).
const (
	colID = iota
	colPromptRole
	colPromptContent
	colCompletionRole
	colCompletionContent
	colKind
	colSource
	colTaskID
	colStep
	colGuidelineID
	colTeacherModel
	colInputTokens
	colOutputTokens
	colCompressionRatio
	colSplit
	numColumns
)

// pageCompressor compresses a page's bytes (zstd_cgo.go, zstd_nocgo.go).
type pageCompressor interface {
	Encode(dst, src []byte) ([]byte, error)
}

// rowFileTemplate is the footer parquet-go writes for a file of Rows with no
// rows: its schema elements and column orders are what Row's tags declare,
// so this encoder and parquet-go's readers agree on the schema by
// construction.
var rowFileTemplate = sync.OnceValues(func() (format.FileMetaData, error) {
	var b bytes.Buffer
	w := parquet.NewGenericWriter[Row](&b)
	if err := w.Close(); err != nil {
		return format.FileMetaData{}, fmt.Errorf("derive the Parquet schema of rows: %w", err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		return format.FileMetaData{}, fmt.Errorf("derive the Parquet schema of rows: %w", err)
	}
	md := *f.Metadata()
	if got := len(parquet.SchemaOf(Row{}).Columns()); got != numColumns || len(md.ColumnOrders) != numColumns {
		return format.FileMetaData{}, fmt.Errorf("derive the Parquet schema of rows: %d columns, the encoder writes %d", got, numColumns)
	}
	return md, nil
})

// columnPaths are the leaf columns' paths in the schema.
var columnPaths = sync.OnceValue(func() [][]string { return parquet.SchemaOf(Row{}).Columns() })

// The footer's structures are parquet-go's (format.FileMetaData and the
// types it holds), restated with only the fields this encoder writes,
// because two of its fields cannot say what the format allows: a
// format.RowGroup always writes its ordinal, an i16 that cannot number the
// row groups of a larger file, and format.Statistics has no
// is_min_value_exact and is_max_value_exact, which truncated string bounds
// need. Field ids and types are parquet.thrift's; the tests read every
// footer back with parquet-go's types and check it against the pages.
type (
	footerMetaData struct {
		Version          int32                  `thrift:"1,required"`
		Schema           []format.SchemaElement `thrift:"2,required"`
		NumRows          int64                  `thrift:"3,required"`
		RowGroups        []footerRowGroup       `thrift:"4,required"`
		KeyValueMetadata []format.KeyValue      `thrift:"5,optional"`
		CreatedBy        string                 `thrift:"6,optional"`
		ColumnOrders     []format.ColumnOrder   `thrift:"7,optional"`
	}
	footerRowGroup struct {
		Columns             []footerColumnChunk `thrift:"1,required"`
		TotalByteSize       int64               `thrift:"2,required"`
		NumRows             int64               `thrift:"3,required"`
		FileOffset          int64               `thrift:"5,optional"`
		TotalCompressedSize int64               `thrift:"6,optional"`
		Ordinal             thrift.Null[int16]  `thrift:"7,optional"`
	}
	footerColumnChunk struct {
		FileOffset int64                `thrift:"2,required"` // always 0: see beginChunk
		MetaData   footerColumnMetaData `thrift:"3,optional"`
	}
	footerColumnMetaData struct {
		Type                  format.Type             `thrift:"1,required"`
		Encoding              []format.Encoding       `thrift:"2,required"`
		PathInSchema          []string                `thrift:"3,required"`
		Codec                 format.CompressionCodec `thrift:"4,required"`
		NumValues             int64                   `thrift:"5,required"`
		TotalUncompressedSize int64                   `thrift:"6,required"`
		TotalCompressedSize   int64                   `thrift:"7,required"`
		DataPageOffset        int64                   `thrift:"9,required"`
		DictionaryPageOffset  int64                   `thrift:"11,optional"`
		Statistics            footerStatistics        `thrift:"12,optional,writezero"`
	}
	footerStatistics struct {
		format.Statistics
		IsMaxValueExact thrift.Null[bool] `thrift:"7,optional"`
		IsMinValueExact thrift.Null[bool] `thrift:"8,optional"`
	}
)

// parquetFile writes one Parquet file: the magic, row groups encoded by
// encoderPool.encode and committed in order, then the footer.
type parquetFile struct {
	out       io.Writer
	split     string
	offset    int64
	numRows   int64
	rowGroups []footerRowGroup
}

func newParquetFile(out io.Writer, split string) (*parquetFile, error) {
	if _, err := rowFileTemplate(); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(out, parquetMagic); err != nil {
		return nil, err
	}
	return &parquetFile{out: out, split: split, offset: int64(len(parquetMagic))}, nil
}

// commit appends an encoded row group, moving its column chunks' offsets to
// where it lands in the file.
func (f *parquetFile) commit(rg *encodedRowGroup) error {
	_, err := f.out.Write(rg.data)
	// Writers do not keep what they are given: the buffer serves another
	// row group.
	*rg.buf = rg.data[:0]
	keep(rg.pool.buffers, rg.buf)
	if err != nil {
		return err
	}
	columns := make([]footerColumnChunk, numColumns)
	var compressed int64
	for i, c := range rg.columns {
		c.MetaData.DataPageOffset += f.offset
		if rg.hasDictionary[i] {
			c.MetaData.DictionaryPageOffset += f.offset
		}
		compressed += c.MetaData.TotalCompressedSize
		columns[i] = c
	}
	f.rowGroups = append(f.rowGroups, footerRowGroup{
		Columns:             columns,
		TotalByteSize:       rg.uncompressed,
		NumRows:             rg.numRows,
		FileOffset:          f.offset,
		TotalCompressedSize: compressed,
	})
	f.offset += int64(len(rg.data))
	f.numRows += rg.numRows
	return nil
}

// close writes the footer.
func (f *parquetFile) close() error {
	md, err := rowFileTemplate()
	if err != nil {
		return err
	}
	// Ordinals, optional, are written when every row group can have one (an
	// i16 numbers 32,768): parquet-go's reader rejects ordinals that stop
	// matching the row groups' positions, arrow-rs numbers rows by them only
	// when all or none are present, and with none readers number row groups
	// by position (arrow-rs writes none past 32,768 row groups too).
	if len(f.rowGroups) <= math.MaxInt16+1 {
		for i := range f.rowGroups {
			f.rowGroups[i].Ordinal = thrift.New(int16(i))
		}
	}
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &footerMetaData{
		Version:          md.Version,
		Schema:           md.Schema,
		NumRows:          f.numRows,
		RowGroups:        f.rowGroups,
		KeyValueMetadata: []format.KeyValue{{Key: "ctxopt.split", Value: f.split}},
		CreatedBy:        parquetCreatedBy,
		ColumnOrders:     md.ColumnOrders,
	})
	if err != nil {
		return fmt.Errorf("encode footer: %w", err)
	}
	footer = binary.LittleEndian.AppendUint32(footer, uint32(len(footer)))
	footer = append(footer, parquetMagic...)
	_, err = f.out.Write(footer)
	return err
}

// encodedRowGroup is a row group's column chunks, contiguous in data, with
// offsets relative to its start.
type encodedRowGroup struct {
	data          []byte
	pool          *encoderPool
	buf           *[]byte // data's buffer, the pool's
	columns       [numColumns]footerColumnChunk
	hasDictionary [numColumns]bool
	numRows       int64
	uncompressed  int64
}

// rowGroupEncoder builds the column chunks of one row group.
type rowGroupEncoder struct {
	rows []Row
	rg   *encodedRowGroup
	// Scratch for the page being built, reused from page to page.
	values     []byte
	reps, defs []byte // levels, one byte each
	repLevels  []byte // RLE-encoded
	defLevels  []byte
	compressed []byte
	dataPages  int // of the current chunk
	dict       map[string]int32
	dictValues []byte
	indices    []int32
}

// encoderPool keeps a Writer's row-group encoders and buffers from one row
// group to the next. Unlike a sync.Pool it keeps them across garbage
// collections: an encoder's page buffers are megabytes, and growing them
// anew after each collection cost page faults and copies (bench/distill.sh).
// It keeps as many as the Writer can use at once.
type encoderPool struct {
	encoders chan *rowGroupEncoder
	buffers  chan *[]byte // row groups' data, from encoding to commit
	pages    chan []byte  // message-text pages, from Write to encoding
}

func newEncoderPool(concurrency int) *encoderPool {
	return &encoderPool{
		encoders: make(chan *rowGroupEncoder, concurrency),
		// Row groups wait for their commit, in order, after encoding.
		buffers: make(chan *[]byte, 2*concurrency),
		// A batch of the default size fills a few pages per split, and a
		// few batches per encoder are on their way.
		pages: make(chan []byte, 8*concurrency+8),
	}
}

// pageBuffer returns an empty buffer for a message-text page.
func (p *encoderPool) pageBuffer() []byte {
	return take(p.pages, func() []byte { return make([]byte, 0, pageBufferSize+pageSlack) })
}

// pageSlack is room past pageBufferSize in a page's buffer for the value
// that fills it, so that the buffer does not double for it.
const pageSlack = 64 << 10

// take returns a value kept in c, or a fresh one.
func take[T any](c chan T, fresh func() T) T {
	select {
	case v := <-c:
		return v
	default:
		return fresh()
	}
}

// keep keeps v in c if there is room.
func keep[T any](c chan T, v T) {
	select {
	case c <- v:
	default:
	}
}

// encode encodes and compresses rows as one row group, with their message
// texts, which texts holds (the rows' Content fields are not read), and
// gives texts' buffers back. textBytes is the rows' size as rowBytes counts
// it, which the Writer has tracked to cut the batch: it sizes the row
// group's buffer.
func (p *encoderPool) encode(rows []Row, texts *messageTexts, textBytes int) (*encodedRowGroup, error) {
	defer texts.release()
	e := take(p.encoders, func() *rowGroupEncoder {
		return &rowGroupEncoder{dict: map[string]int32{}}
	})
	defer keep(p.encoders, e)
	e.rows = rows
	buf := take(p.buffers, func() *[]byte { return new([]byte) })
	e.rg = &encodedRowGroup{numRows: int64(len(rows)), pool: p, buf: buf, data: slices.Grow((*buf)[:0], textBytes/3)}
	defer func() { e.rows, e.rg = nil, nil }()

	message := func(list func(*Row) []Message, field func(*Message) string) func(*Row, func(string)) {
		return func(r *Row, yield func(string)) {
			ms := list(r)
			for i := range ms {
				yield(field(&ms[i]))
			}
		}
	}
	prompt := func(r *Row) []Message { return r.Prompt }
	completion := func(r *Row) []Message { return r.Completion }
	role := func(m *Message) string { return m.Role }

	steps := []func() error{
		func() error { return e.plainStrings(colID, func(r *Row) string { return r.ID }) },
		func() error { return e.dictMessages(colPromptRole, message(prompt, role)) },
		func() error { return e.writeTexts(colPromptContent, texts, 0) },
		func() error { return e.dictMessages(colCompletionRole, message(completion, role)) },
		func() error { return e.writeTexts(colCompletionContent, texts, 1) },
		func() error { return e.dictStrings(colKind, func(r *Row) string { return r.Kind }) },
		func() error { return e.dictStrings(colSource, func(r *Row) string { return r.Source }) },
		func() error { return e.dictStrings(colTaskID, func(r *Row) string { return r.TaskID }) },
		func() error { return e.int64s(colStep, func(r *Row) int64 { return r.Step }) },
		func() error { return e.dictStrings(colGuidelineID, func(r *Row) string { return r.GuidelineID }) },
		func() error { return e.dictStrings(colTeacherModel, func(r *Row) string { return r.TeacherModel }) },
		func() error { return e.int64s(colInputTokens, func(r *Row) int64 { return r.InputTokens }) },
		func() error { return e.int64s(colOutputTokens, func(r *Row) int64 { return r.OutputTokens }) },
		func() error {
			return e.doubles(colCompressionRatio, func(r *Row) float64 { return r.CompressionRatio })
		},
		func() error { return e.dictStrings(colSplit, func(r *Row) string { return r.Split }) },
	}
	for col, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("encode column %s: %w", strings.Join(columnPaths()[col], "."), err)
		}
	}
	for _, c := range e.rg.columns {
		e.rg.uncompressed += c.MetaData.TotalUncompressedSize
	}
	return e.rg, nil
}

// beginChunk starts column col's chunk at the end of the row group's data.
// Its file_offset stays 0: the field is deprecated and means the offset of a
// copy of the ColumnMetaData outside the footer, which is not written
// (parquet-format's parquet.thrift; parquet-java, Arrow and DuckDB write 0);
// readers find the pages by dictionary_page_offset and data_page_offset.
func (e *rowGroupEncoder) beginChunk(col int, typ format.Type, encodings ...format.Encoding) *footerColumnChunk {
	e.dataPages = 0
	c := &e.rg.columns[col]
	*c = footerColumnChunk{MetaData: footerColumnMetaData{
		Type:         typ,
		Encoding:     encodings,
		PathInSchema: columnPaths()[col],
		Codec:        format.Zstd,
	}}
	return c
}

// page is a data page's contents before compression.
type page struct {
	encoding format.Encoding
	values   []byte // encoded values
	reps     []byte // repetition levels, one per value or null (message columns)
	defs     []byte // definition levels, likewise
	rows     int
	nulls    int
	count    int // values and nulls
}

// level records the levels of the n-th value (from 0) of a row's message
// field.
func (p *page) level(n int) {
	p.reps = append(p.reps, byte(min(n, 1)))
	p.defs = append(p.defs, 1)
}

// endRow ends a row that had n values: a message field's row with none (an
// empty list) is one null.
func (p *page) endRow(n int) {
	if n == 0 {
		p.reps, p.defs = append(p.reps, 0), append(p.defs, 0)
		p.nulls++
		n = 1
	}
	p.count += n
	p.rows++
}

// writePage compresses a data page (v2: levels stay uncompressed) into the
// row group's data.
func (e *rowGroupEncoder) writePage(c *footerColumnChunk, p page) error {
	var reps, defs []byte
	if p.reps != nil {
		enc := rle.Encoding{BitWidth: 1}
		var err error
		if e.repLevels, err = enc.EncodeLevels(e.repLevels, p.reps); err != nil {
			return err
		}
		if e.defLevels, err = enc.EncodeLevels(e.defLevels, p.defs); err != nil {
			return err
		}
		reps, defs = e.repLevels, e.defLevels
	}
	levels := len(reps) + len(defs)
	if err := checkPageSize(levels + len(p.values)); err != nil {
		return err
	}
	compressed, err := zstdCodec.Encode(e.compressed[:0], p.values)
	if err != nil {
		return err
	}
	e.compressed = compressed
	h := format.PageHeader{
		Type:                 format.DataPageV2,
		UncompressedPageSize: int32(levels + len(p.values)),
		CompressedPageSize:   int32(levels + len(compressed)),
		DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{
			NumValues:                  int32(p.count),
			NumNulls:                   int32(p.nulls),
			NumRows:                    int32(p.rows),
			Encoding:                   p.encoding,
			DefinitionLevelsByteLength: int32(len(defs)),
			RepetitionLevelsByteLength: int32(len(reps)),
			IsCompressed:               thrift.New(true),
		}),
	}
	if e.dataPages == 0 {
		c.MetaData.DataPageOffset = int64(len(e.rg.data))
	}
	e.dataPages++
	if err := e.appendPage(c, &h, reps, defs, compressed); err != nil {
		return err
	}
	c.MetaData.NumValues += int64(p.count)
	c.MetaData.TotalUncompressedSize += int64(levels + len(p.values))
	c.MetaData.Statistics.NullCount += int64(p.nulls)
	return nil
}

// appendPage appends a page header, with the bodies' checksum, and the
// bodies to the row group's data and counts them in the chunk's sizes (the
// header in both).
func (e *rowGroupEncoder) appendPage(c *footerColumnChunk, h *format.PageHeader, bodies ...[]byte) error {
	// The CRC-32 of the page's bodies as stored: zstd frames carry no
	// checksum and levels and indices none at all, so without it a flipped
	// bit can read back as a different, plausible row.
	var crc uint32
	for _, b := range bodies {
		crc = crc32.Update(crc, crc32.IEEETable, b)
	}
	h.CRC = int32(crc)
	header, err := thrift.Marshal(new(thrift.CompactProtocol), h)
	if err != nil {
		return fmt.Errorf("encode page header: %w", err)
	}
	e.rg.data = append(e.rg.data, header...)
	size := len(header)
	for _, b := range bodies {
		e.rg.data = append(e.rg.data, b...)
		size += len(b)
	}
	c.MetaData.TotalCompressedSize += int64(size)
	c.MetaData.TotalUncompressedSize += int64(len(header))
	return nil
}

// plainStrings writes a required string column PLAIN, in pages of about
// pageBufferSize.
func (e *rowGroupEncoder) plainStrings(col int, get func(*Row) string) error {
	c := e.beginChunk(col, format.ByteArray, format.Plain)
	var s minMax[string]
	p := page{encoding: format.Plain, values: e.values[:0]}
	for i := range e.rows {
		v := get(&e.rows[i])
		p.values = appendByteArray(p.values, v)
		p.rows++
		p.count++
		s.add(v)
		if len(p.values) >= pageBufferSize {
			if err := e.writePage(c, p); err != nil {
				return err
			}
			p = page{encoding: format.Plain, values: p.values[:0]}
		}
	}
	e.values = p.values
	if p.count > 0 {
		if err := e.writePage(c, p); err != nil {
			return err
		}
	}
	stringBounds(&c.MetaData.Statistics, &s)
	return nil
}

// messageTexts builds the pages of the two message-text columns (prompt and
// completion contents, PLAIN with their levels) as the Writer takes rows,
// while the texts are fresh in the cache: built later from a batch, the copy
// read them back from memory, and the batch kept every text until then.
// Pages hold about pageBufferSize bytes and end at a row's end. Bounds are
// truncated (stringBounds), as DuckDB's are.
type messageTexts struct {
	pool    *encoderPool
	columns [2]textColumn // prompt, completion
}

type textColumn struct {
	pages []page // full, then the one being filled
	s     minMax[string]
}

func (p *encoderPool) newMessageTexts() *messageTexts {
	return &messageTexts{pool: p}
}

// add appends r's message texts. A text that is not valid UTF-8 is found
// here, in the bytes just copied, and leaves the pages as they were.
func (t *messageTexts) add(r *Row) error {
	before := t.mark()
	for i, ms := range [2][]Message{r.Prompt, r.Completion} {
		c := &t.columns[i]
		if len(c.pages) == 0 || len(c.pages[len(c.pages)-1].values) >= pageBufferSize {
			c.pages = append(c.pages, page{encoding: format.Plain, values: t.pool.pageBuffer()})
		}
		p := &c.pages[len(c.pages)-1]
		for n := range ms {
			start := len(p.values) + 4
			p.values = appendByteArray(p.values, ms[n].Content)
			if !utf8.Valid(p.values[start:]) {
				t.restore(before)
				return fmt.Errorf("%s[%d].content: not valid UTF-8", [2]string{"prompt", "completion"}[i], n)
			}
			p.level(n)
		}
		p.endRow(len(ms))
	}
	// The bounds take the row only once it is in: restore does not undo
	// them.
	for i, ms := range [2][]Message{r.Prompt, r.Completion} {
		for n := range ms {
			addText(&t.columns[i].s, ms[n].Content)
		}
	}
	return nil
}

// textMark is where a column's pages stood: how many, and the last one.
type textMark struct {
	pages int
	last  page
}

func (t *messageTexts) mark() (m [2]textMark) {
	for i, c := range t.columns {
		if m[i].pages = len(c.pages); m[i].pages > 0 {
			m[i].last = c.pages[m[i].pages-1]
		}
	}
	return m
}

// restore puts the pages back as they stood at m, giving back the buffers
// of pages begun since.
func (t *messageTexts) restore(m [2]textMark) {
	for i := range t.columns {
		c := &t.columns[i]
		for _, p := range c.pages[m[i].pages:] {
			keep(t.pool.pages, p.values[:0])
		}
		if c.pages = c.pages[:m[i].pages]; m[i].pages > 0 {
			c.pages[m[i].pages-1] = m[i].last
		}
	}
}

// addText is m.add for a text of the caller's, who may reuse its memory: a
// new bound is a copy. Bounds change rarely once a few rows are in.
func addText(m *minMax[string], v string) {
	switch {
	case !m.set:
		v = strings.Clone(v)
		m.min, m.max, m.set = v, v, true
	case v < m.min:
		m.min = strings.Clone(v)
	case v > m.max:
		m.max = strings.Clone(v)
	}
}

// release gives the pages' buffers back to the pool.
func (t *messageTexts) release() {
	for i := range t.columns {
		for _, p := range t.columns[i].pages {
			if p.values != nil {
				keep(t.pool.pages, p.values[:0])
			}
		}
		t.columns[i].pages = nil
	}
}

// writeTexts writes message-text column i of texts as column col's chunk,
// giving each page's buffer back once it is compressed.
func (e *rowGroupEncoder) writeTexts(col int, texts *messageTexts, i int) error {
	tc := &texts.columns[i]
	c := e.beginChunk(col, format.ByteArray, format.Plain, format.RLE)
	for k := range tc.pages {
		p := &tc.pages[k]
		if p.count > 0 {
			if err := e.writePage(c, *p); err != nil {
				return err
			}
		}
		keep(texts.pool.pages, p.values[:0])
		p.values = nil
	}
	stringBounds(&c.MetaData.Statistics, &tc.s)
	return nil
}

// dictStrings writes a required string column dictionary-encoded: a PLAIN
// dictionary page, then one data page of RLE-encoded indices.
func (e *rowGroupEncoder) dictStrings(col int, get func(*Row) string) error {
	return e.dictionary(col, false, func(r *Row, yield func(string)) { yield(get(r)) })
}

// dictMessages writes a field of a message list dictionary-encoded, with its
// levels.
func (e *rowGroupEncoder) dictMessages(col int, each func(*Row, func(string))) error {
	return e.dictionary(col, true, each)
}

func (e *rowGroupEncoder) dictionary(col int, levels bool, each func(*Row, func(string))) error {
	encodings := []format.Encoding{format.Plain, format.RLEDictionary}
	if levels {
		encodings = []format.Encoding{format.Plain, format.RLE, format.RLEDictionary}
	}
	c := e.beginChunk(col, format.ByteArray, encodings...)
	clear(e.dict)
	p := page{encoding: format.RLEDictionary}
	if levels {
		p.reps, p.defs = e.reps[:0], e.defs[:0]
	}
	indices := e.indices[:0]
	dictValues := e.dictValues[:0]
	var s minMax[string]
	// Runs of one value are the rule (a column of one kind, one teacher, the
	// roles of every prompt): comparing with the last value skips hashing.
	last, lastK := "", int32(-1)
	for i := range e.rows {
		n := 0
		each(&e.rows[i], func(v string) {
			k := lastK
			if k < 0 || v != last {
				var ok bool
				if k, ok = e.dict[v]; !ok {
					k = int32(len(e.dict))
					e.dict[v] = k
					dictValues = appendByteArray(dictValues, v)
					s.add(v)
				}
				last, lastK = v, k
			}
			indices = append(indices, k)
			if levels {
				p.level(n)
			}
			n++
		})
		p.endRow(n)
	}
	e.indices, e.dictValues = indices, dictValues
	if levels {
		e.reps, e.defs = p.reps, p.defs
	}

	if err := checkPageSize(len(dictValues)); err != nil {
		return err
	}
	compressed, err := zstdCodec.Encode(e.compressed[:0], dictValues)
	if err != nil {
		return err
	}
	e.compressed = compressed
	c.MetaData.DictionaryPageOffset = int64(len(e.rg.data))
	e.rg.hasDictionary[col] = true
	h := format.PageHeader{
		Type:                 format.DictionaryPage,
		UncompressedPageSize: int32(len(dictValues)),
		CompressedPageSize:   int32(len(compressed)),
		DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: int32(len(e.dict)), Encoding: format.Plain}),
	}
	if err := e.appendPage(c, &h, compressed); err != nil {
		return err
	}
	c.MetaData.TotalUncompressedSize += int64(len(dictValues))

	enc := rle.DictionaryEncoding{}
	if p.values, err = enc.EncodeInt32(e.values[:0], indices); err != nil {
		return err
	}
	e.values = p.values
	if err := e.writePage(c, p); err != nil {
		return err
	}
	stringBounds(&c.MetaData.Statistics, &s)
	return nil
}

// int64s writes a required INT64 column PLAIN.
func (e *rowGroupEncoder) int64s(col int, get func(*Row) int64) error {
	c := e.beginChunk(col, format.Int64, format.Plain)
	var s minMax[int64]
	p := page{encoding: format.Plain, values: e.values[:0]}
	for i := range e.rows {
		v := get(&e.rows[i])
		p.values = binary.LittleEndian.AppendUint64(p.values, uint64(v))
		s.add(v)
	}
	p.rows, p.count = len(e.rows), len(e.rows)
	e.values = p.values
	if err := e.writePage(c, p); err != nil {
		return err
	}
	s.bounds(&c.MetaData.Statistics, func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) })
	return nil
}

// doubles writes a required DOUBLE column PLAIN.
func (e *rowGroupEncoder) doubles(col int, get func(*Row) float64) error {
	c := e.beginChunk(col, format.Double, format.Plain)
	var s minMax[float64]
	nan := false
	p := page{encoding: format.Plain, values: e.values[:0]}
	for i := range e.rows {
		v := get(&e.rows[i])
		p.values = binary.LittleEndian.AppendUint64(p.values, math.Float64bits(v))
		if math.IsNaN(v) {
			nan = true
		} else {
			s.add(v)
		}
	}
	p.rows, p.count = len(e.rows), len(e.rows)
	e.values = p.values
	if err := e.writePage(c, p); err != nil {
		return err
	}
	if !nan { // NaN has no place in the order: no bounds rather than wrong ones
		// The format's rule for zeros: a zero minimum is written -0.0 and a
		// zero maximum +0.0, whichever zeros the column holds, so that a
		// reader ordering -0.0 before +0.0 skips no row group holding either.
		if s.min == 0 {
			s.min = math.Copysign(0, -1)
		}
		if s.max == 0 {
			s.max = 0
		}
		s.bounds(&c.MetaData.Statistics, func(v float64) []byte {
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
		})
	}
	return nil
}

// checkPageSize refuses a page whose size does not fit the header's int32:
// one row's text that long (row groups are bounded by RowGroupBytes, but a
// page holds at least one row).
func checkPageSize(n int) error {
	if n > math.MaxInt32 {
		return fmt.Errorf("a page of %d bytes is over Parquet's limit of 2 GiB: a row's text is too long", n)
	}
	return nil
}

func appendByteArray(b []byte, v string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// minMax tracks a column chunk's bounds for its statistics.
type minMax[T cmp.Ordered] struct {
	min, max T
	set      bool
}

func (m *minMax[T]) add(v T) {
	if !m.set {
		m.min, m.max, m.set = v, v, true
		return
	}
	m.min, m.max = min(m.min, v), max(m.max, v)
}

// bounds sets a chunk's statistics to m's bounds, exact.
func (m *minMax[T]) bounds(s *footerStatistics, encode func(T) []byte) {
	if !m.set {
		return
	}
	s.MinValue, s.IsMinValueExact = encode(m.min), thrift.New(true)
	s.MaxValue, s.IsMaxValueExact = encode(m.max), thrift.New(true)
}

// statsMaxBytes bounds a string statistic, as Arrow's writer (64 bytes) and
// parquet-java's column indexes do: a chunk's bounds are copied into the
// footer, where a long identifier would cost its length in every row group.
const statsMaxBytes = 64

// stringBounds sets a chunk's statistics to m's bounds under the format's
// order for UTF-8 strings (unsigned bytewise), each at most statsMaxBytes
// long and flagged inexact when truncated: the minimum becomes a prefix,
// the maximum a prefix with its last character incremented, or nothing when
// no such bound fits. Values are valid UTF-8 (checkRow), and so are the
// bounds.
func stringBounds(s *footerStatistics, m *minMax[string]) {
	if !m.set {
		return
	}
	lo, exact := m.min, true
	if len(lo) > statsMaxBytes {
		lo, exact = lo[:runeCut(lo, statsMaxBytes)], false
	}
	s.MinValue, s.IsMinValueExact = []byte(lo), thrift.New(exact)
	if hi, exact, ok := upperBound(m.max); ok {
		s.MaxValue, s.IsMaxValueExact = []byte(hi), thrift.New(exact)
	}
}

// runeCut returns the largest n <= limit at which s can be cut without
// splitting a character.
func runeCut(s string, limit int) int {
	n := limit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// upperBound returns v, or when it is over statsMaxBytes, the shortest
// string over v in bytewise order that a truncated prefix of v gives:
// cut after a character that can be incremented (not U+10FFFF; U+D7FF
// becomes U+E000, past the surrogates), incremented. In UTF-8 bytewise
// order is code point order, so it is greater than every string starting
// with v's prefix up to that character, v among them. ok is false when no
// character of the prefix can be incremented within the limit.
func upperBound(v string) (bound string, exact, ok bool) {
	if len(v) <= statsMaxBytes {
		return v, true, true
	}
	for end := runeCut(v, statsMaxBytes); end > 0; {
		r, size := utf8.DecodeLastRuneInString(v[:end])
		end -= size
		if r == utf8.MaxRune || r == utf8.RuneError && size == 1 {
			continue
		}
		next := r + 1
		if next == 0xd800 {
			next = 0xe000
		}
		if end+utf8.RuneLen(next) <= statsMaxBytes {
			return v[:end] + string(next), false, true
		}
	}
	return "", false, false
}
