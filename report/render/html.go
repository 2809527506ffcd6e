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
	Table *analysis.Table
	// Figs are shown side by side where the page is wide enough.
	Figs []htmlFigure
	// Folded: a table too long or wide to read at a glance is behind a
	// disclosure (the findings never are).
	Folded bool
}

// htmlFigure is one figure: one panel, or its small multiples.
type htmlFigure struct {
	Figure *analysis.Figure
	Panels []htmlPanel
}

// htmlPanel is one plot of a figure's small multiples with its legend,
// listed by the page below the plot (never over its data).
type htmlPanel struct {
	Title        string
	Wide, Narrow template.HTML // the page shows the one that fits
	Legend       []legendItem
}

// foldRows and foldColumns: past these a table is folded.
const foldRows, foldColumns = 12, 10

// HTML writes one self-contained page: every table, each followed by its
// figure (same name) drawn inline as SVG, then the figures without a table.
// It loads nothing (a Content-Security-Policy forbids it), so it works
// offline and can be mailed; CSS alone makes it light or dark and fits it
// to a phone.
func HTML(w io.Writer, title string, tables []analysis.Table, figs []analysis.Figure) error {
	byName := map[string][]int{} // table name -> the figures shown after it
	for i, f := range figs {
		k := f.Name
		if f.After != "" {
			k = f.After
		}
		byName[k] = append(byName[k], i)
	}
	placed := make([]bool, len(figs))
	var items []htmlItem
	fig := func(i int) (htmlFigure, error) {
		var panels []htmlPanel
		ps := Panels(figs[i])
		for _, p := range ps {
			wide, err := inlineSVG(p, wideSize)
			if err != nil {
				return htmlFigure{}, err
			}
			narrow, err := inlineSVG(p, narrowSize)
			if err != nil {
				return htmlFigure{}, err
			}
			title := ""
			if len(ps) > 1 {
				title = p.Title
			}
			// gonum escapes every text it draws.
			panels = append(panels, htmlPanel{Title: title, Wide: template.HTML(wide), Narrow: template.HTML(narrow), Legend: legendOf(p)})
		}
		placed[i] = true
		return htmlFigure{Figure: &figs[i], Panels: panels}, nil
	}
	addFigs := func(idx []int) error {
		var row []htmlFigure
		for _, i := range idx {
			f, err := fig(i)
			if err != nil {
				return err
			}
			row = append(row, f)
		}
		if len(row) > 0 {
			items = append(items, htmlItem{Figs: row})
		}
		return nil
	}
	for i := range tables {
		t := &tables[i]
		items = append(items, htmlItem{Table: t, Folded: t.Name != "findings" && (len(t.Rows) > foldRows || len(t.Columns) > foldColumns)})
		if err := addFigs(byName[t.Name]); err != nil {
			return err
		}
	}
	var rest []int
	for i := range figs {
		if !placed[i] {
			rest = append(rest, i)
		}
	}
	for _, i := range rest {
		if err := addFigs([]int{i}); err != nil {
			return err
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
