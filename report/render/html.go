package render

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"html/template"
	"io"

	"github.com/mptester/mptester/report/analysis"
)

//go:embed report.html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New("report").Parse(htmlSource))

type htmlItem struct {
	Table  *analysis.Table
	Figure *analysis.Figure
	SVG    template.HTML
}

// HTML writes one self-contained page: every table, each followed by its
// figure (same name) drawn inline as SVG, then the figures without a table.
// It loads nothing (a Content-Security-Policy forbids it), so it works
// offline and can be mailed; CSS alone makes it light or dark and fits it
// to a phone.
func HTML(w io.Writer, title string, tables []analysis.Table, figs []analysis.Figure) error {
	byName := map[string]int{}
	for i, f := range figs {
		byName[f.Name] = i
	}
	placed := make([]bool, len(figs))
	var items []htmlItem
	addFig := func(i int) error {
		svg, err := inlineSVG(figs[i])
		if err != nil {
			return err
		}
		placed[i] = true
		items = append(items, htmlItem{Figure: &figs[i], SVG: template.HTML(svg)}) // gonum escapes every text it draws
		return nil
	}
	for i := range tables {
		items = append(items, htmlItem{Table: &tables[i]})
		if j, ok := byName[tables[i].Name]; ok {
			if err := addFig(j); err != nil {
				return err
			}
		}
	}
	for i := range figs {
		if !placed[i] {
			if err := addFig(i); err != nil {
				return err
			}
		}
	}
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, struct {
		Title string
		Items []htmlItem
	}{title, items}); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// JSON writes the tables (every row, those made on demand streamed as
// they are read back) and the figures' data.
func JSON(w io.Writer, tables []analysis.Table, figs []analysis.Figure) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	put := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = bw.Write(b)
		return err
	}
	bw.WriteString("{\n \"tables\": [")
	for i, t := range tables {
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n  ")
		// The table's fields, then its rows one line each.
		b, err := json.Marshal(struct {
			Name    string   `json:"name"`
			Title   string   `json:"title"`
			Note    string   `json:"note,omitempty"`
			Columns []string `json:"columns"`
			Long    bool     `json:"long,omitempty"`
		}{t.Name, t.Title, t.Note, t.Columns, t.Long})
		if err != nil {
			return err
		}
		bw.Write(bytes.TrimSuffix(b, []byte("}")))
		bw.WriteString(`,"rows":[`)
		n := 0
		for r := range t.All() {
			if n > 0 {
				bw.WriteString(",")
			}
			bw.WriteString("\n   ")
			if err := put(r); err != nil {
				return err
			}
			n++
		}
		bw.WriteString("]}")
	}
	bw.WriteString("\n ],\n \"figures\": ")
	if figs == nil {
		figs = []analysis.Figure{}
	}
	if err := put(figs); err != nil {
		return err
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}
