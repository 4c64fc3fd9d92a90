package ui

import (
	"bytes"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore/internal/inspect"
)

// page is what the layout renders around a view's data.
type page struct {
	Name, Title string
	Base        string // the relative path from the page to the handler's root, ending in "/"
	Now         string
	Refresh     int // seconds between live refreshes; 0 for none
	Status      int
	Err         string
	Data        any
	Nav         []navLink
	// Actions is set when the handler takes actions (Options.Actions); CSRF is then the
	// token its forms carry, of the authenticated user.
	Actions bool
	CSRF    string
	query   url.Values
}

// navLink is one entry of the navigation.
type navLink struct {
	Href, Title string
	Active      bool
}

// navigation links every view but one execution's, lighting the one of view name.
func navigation(base, name string) []navLink {
	var out []navLink
	for _, v := range views {
		if v.name == "execution" {
			continue
		}
		href := base + strings.TrimPrefix(v.pattern, "/")
		if v.name == "overview" {
			href = base
		}
		out = append(out, navLink{Href: href, Title: v.title,
			Active: v.name == name || (name == "execution" && v.name == "executions")})
	}
	return out
}

// Href is the page's own address with the query parameter key set to value ("" removes it).
func (p *page) Href(key, value string) string {
	q := url.Values{}
	for k, v := range p.query {
		q[k] = v
	}
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	if len(q) == 0 {
		return "?"
	}
	return "?" + q.Encode()
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"rel": inspect.RelativeTo,
	"dur": func(seconds float64) string {
		return inspect.ShortDuration(time.Duration(seconds * float64(time.Second)).Round(time.Second))
	},
	"path":  url.PathEscape,
	"query": url.QueryEscape,
	"lower": strings.ToLower,
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.Itoa(n) + " " + many
	},
	"raw":  rawJSON,
	"list": func(v ...string) []string { return v },
	// dict makes the arguments of a shared template: key, value, key, value…
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}

// parsePages parses the layout with each view's template.
func parsePages() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html"))
	pages := map[string]*template.Template{}
	for _, v := range append(views, view{name: "error"}, actView) {
		t := template.Must(layout.Clone())
		pages[v.name] = template.Must(t.ParseFS(templateFiles, "templates/"+v.name+".html"))
	}
	return pages
}

// render writes view v's page: its data, or the error err with status.
func (h *handler) render(w http.ResponseWriter, r *http.Request, v view, status int, data any, err error) {
	depth := strings.Count(r.URL.EscapedPath(), "/") - 1
	base := "./"
	if depth > 0 {
		base = strings.Repeat("../", depth)
	}
	p := &page{Name: v.name, Title: v.title, Base: base, Now: inspect.FormatTime(h.o.Now()), Status: status, Data: data,
		Nav: navigation(base, v.name), query: r.URL.Query()}
	if h.o.Actions {
		user, _, _ := r.BasicAuth()
		p.Actions, p.CSRF = true, h.csrfToken(user)
	}
	if h.o.Refresh > 0 && v.name != actView.name {
		p.Refresh = max(1, int(h.o.Refresh/time.Second))
	}
	t := h.pages[v.name]
	if err != nil {
		p.Err = err.Error()
		t = h.pages["error"]
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		http.Error(w, "rendering "+v.name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}
