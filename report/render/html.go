package render

import (
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

// JSON writes the tables (every row, Long ones too) and the figures' data.
func JSON(w io.Writer, tables []analysis.Table, figs []analysis.Figure) error {
	if figs == nil {
		figs = []analysis.Figure{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(struct {
		Tables  []analysis.Table  `json:"tables"`
		Figures []analysis.Figure `json:"figures"`
	}{tables, figs})
}
