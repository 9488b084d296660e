package pg_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/worklease/worklease"
)

// sqlKinds is the one table of the event kinds that the schema's SQL
// writes as bare numbers: released migrations never change, and SQL cannot
// name a Go constant, so this table names each number instead, in the
// order the SQL writes them, for each function of a migration (or the
// table definitions before the first, "-") and each Go declaration that
// holds SQL. TestSQLEventKinds checks every number against it, so a kind
// that moved in Go (see worklease.EventKind, whose values are frozen), or a
// number written where this table names none, fails the test. The numbers
// are read from an event's kind (ROW(kind, …)::event), an answer's event
// kinds (ARRAY[kind::smallint]), an index into a domain's counts
// (counts[kind]), and the size of the counts (array_fill(0::bigint,
// ARRAY[n]), n being the last transition's number).
var sqlKinds = map[string][]worklease.EventKind{
	"001_init.sql -":                             {worklease.EventForgotten, worklease.EventForgotten}, // the counts' size, twice
	"001_init.sql _dead_letter":                  {worklease.EventDeadLettered, worklease.EventPaused},
	"001_init.sql _expire":                       {worklease.EventExpired, worklease.EventRequeued},
	"001_init.sql _grant":                        {worklease.EventAcquired},
	"001_init.sql _reject":                       {worklease.EventRejected},
	"001_init.sql try_acquire":                   {worklease.EventEnqueued, worklease.EventOutOfOrder},
	"001_init.sql succeed":                       {worklease.EventProcessed},
	"001_init.sql fail":                          {worklease.EventRetrying},
	"001_init.sql extend":                        {worklease.EventExtended},
	"001_init.sql kill":                          {worklease.EventKilled},
	"001_init.sql redrive":                       {worklease.EventRedriven},
	"001_init.sql force_release":                 {worklease.EventReleased, worklease.EventRequeued},
	"001_init.sql set_paused":                    {worklease.EventPaused, worklease.EventResumed},
	"001_init.sql forget":                        {worklease.EventForgotten, worklease.EventForgotten}, // its event, and the counts' size
	"001_init.sql claim":                         {worklease.EventAcquired, worklease.EventAcquired, worklease.EventAcquired},
	"001_init.sql retry":                         {worklease.EventRetrying, worklease.EventRequeued},
	"001_init.sql succeed_many":                  {worklease.EventProcessed, worklease.EventProcessed},
	"002_batches.sql enqueue_many":               {worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventEnqueued},
	"005_fences.sql _grant":                      {worklease.EventAcquired},
	"005_fences.sql claim":                       {worklease.EventAcquired, worklease.EventAcquired, worklease.EventAcquired},
	"006_domain_keys.sql _dead_letter":           {worklease.EventDeadLettered, worklease.EventPaused},
	"006_domain_keys.sql _expire":                {worklease.EventExpired, worklease.EventRequeued},
	"006_domain_keys.sql _grant":                 {worklease.EventAcquired},
	"006_domain_keys.sql try_acquire":            {worklease.EventEnqueued, worklease.EventOutOfOrder},
	"006_domain_keys.sql fail":                   {worklease.EventRetrying},
	"006_domain_keys.sql extend":                 {worklease.EventExtended},
	"006_domain_keys.sql _kill_keeping_delay":    {worklease.EventKilled},
	"006_domain_keys.sql _redrive_keeping_delay": {worklease.EventRedriven},
	"006_domain_keys.sql set_paused":             {worklease.EventPaused, worklease.EventResumed},
	"006_domain_keys.sql forget":                 {worklease.EventForgotten, worklease.EventForgotten}, // its event, and the counts' size
	"006_domain_keys.sql claim":                  {worklease.EventAcquired, worklease.EventAcquired, worklease.EventAcquired},
	"006_domain_keys.sql retry":                  {worklease.EventRetrying, worklease.EventRequeued},
	"006_domain_keys.sql succeed_many":           {worklease.EventProcessed, worklease.EventProcessed},
	"006_domain_keys.sql enqueue_many":           {worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventEnqueued},
	"007_producers.sql -":                        {worklease.EventCancelled, worklease.EventCancelled, worklease.EventCancelled}, // the counts' size
	"007_producers.sql _enqueue":                 {worklease.EventEnqueued},
	"007_producers.sql try_acquire":              {worklease.EventEnqueued, worklease.EventOutOfOrder},
	"007_producers.sql append":                   {worklease.EventEnqueued},
	"007_producers.sql cancel":                   {worklease.EventCancelled, worklease.EventCancelled},
	"007_producers.sql forget":                   {worklease.EventForgotten, worklease.EventCancelled}, // its event, and the counts' size
	"007_producers.sql enqueue_many":             {worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventEnqueued},
	"007_producers.sql succeed":                  {worklease.EventProcessed},
	"007_producers.sql fail":                     {worklease.EventRetrying},
	"007_producers.sql claim":                    {worklease.EventAcquired, worklease.EventAcquired, worklease.EventAcquired},
	"008_schedules.sql retry":                    {worklease.EventRetrying, worklease.EventRequeued},
	"008_schedules.sql _enqueue":                 {worklease.EventEnqueued},
	"008_schedules.sql append":                   {worklease.EventEnqueued},
	"008_schedules.sql enqueue_many":             {worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventEnqueued},
	"009_domain_key_column.sql enqueue_many":     {worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventEnqueued},
	"010_scheduled_out_of_turn.sql try_acquire":  {worklease.EventEnqueued, worklease.EventOutOfOrder},
	"011_enqueue_locks_first.sql enqueue_many":   {worklease.EventEnqueued, worklease.EventEnqueued, worklease.EventEnqueued},
	"fast.go endLease":                           {worklease.EventProcessed, worklease.EventProcessed},
	"fast.go newFastStatements":                  {worklease.EventAcquired, worklease.EventAcquired},
	"fastpull.go newPullStatements":              {worklease.EventAcquired, worklease.EventAcquired, worklease.EventAcquired, worklease.EventAcquired, worklease.EventProcessed, worklease.EventProcessed},
}

// TestSQLEventKinds checks that every event kind the SQL writes as a
// number is the one sqlKinds names there, and that sqlKinds names no more.
func TestSQLEventKinds(t *testing.T) {
	t.Parallel()
	got, err := sqlKindNumbers(".")
	if err != nil {
		t.Fatal(err)
	}
	for place, kinds := range sqlKinds {
		want := make([]int, len(kinds))
		for i, k := range kinds {
			want[i] = int(k)
		}
		if fmt.Sprint(got[place]) != fmt.Sprint(want) {
			t.Errorf("%s writes the kinds %v; sqlKinds names %v, which are %v", place, got[place], kinds, want)
		}
	}
	for place, numbers := range got {
		if _, ok := sqlKinds[place]; !ok {
			t.Errorf("%s writes the kinds %v, which sqlKinds does not name", place, numbers)
		}
	}
}

var (
	createFunction = regexp.MustCompile(`CREATE (?:OR REPLACE )?FUNCTION \{\{schema\}\}\.(\w+)\(`)
	// kindNumbers finds the places a number may be a kind: a ROW, which
	// may be an event or an answer, an index into counts, and the counts'
	// size.
	kindNumbers = regexp.MustCompile(`ROW\(|counts\[([^\]]*)\]|array_fill\(0::bigint, ARRAY\[([^\]]*)\]\)`)
	// rowCast is the cast that follows a ROW's closing parenthesis.
	rowCast    = regexp.MustCompile(`^::(?:\{\{schema\}\}|%(?:\[\d+\])?s)\.(\w+)`)
	caseKinds  = regexp.MustCompile(`^CASE WHEN [^()]* THEN (\d+) ELSE (\d+) END$`)
	arrayKinds = regexp.MustCompile(`ARRAY\[(\d+)::smallint\]`)
)

// sqlKindNumbers returns the kind numbers the SQL of the migrations and
// of the Go files in dir writes, by place (see sqlKinds).
func sqlKindNumbers(dir string) (map[string][]int, error) {
	out := make(map[string][]int)
	sqls, err := filepath.Glob(filepath.Join(dir, "migrations", "*.sql"))
	if err != nil {
		return nil, err
	}
	for _, name := range sqls {
		text, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		sql := string(text)
		starts := createFunction.FindAllStringSubmatchIndex(sql, -1)
		placeOf := func(at int) string {
			function := "-"
			for _, s := range starts {
				if s[0] <= at {
					function = sql[s[2]:s[3]]
				}
			}
			return filepath.Base(name) + " " + function
		}
		if err := scanKinds(sql, placeOf, out); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	gos, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, name := range gos {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			var errs []error
			ast.Inspect(decl, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					errs = append(errs, err)
					return false
				}
				place := filepath.Base(name) + " " + declName(decl)
				if err := scanKinds(s, func(int) string { return place }, out); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", fset.Position(lit.Pos()), err))
				}
				return false
			})
			if len(errs) > 0 {
				return nil, errs[0]
			}
		}
	}
	return out, nil
}

// declName names a top-level declaration: a function, or the first name a
// declaration of types, constants or variables declares.
func declName(decl ast.Decl) string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		return d.Name.Name
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				return s.Names[0].Name
			case *ast.TypeSpec:
				return s.Name.Name
			}
		}
	}
	return "-"
}

// scanKinds adds the kind numbers sql writes to out, each under the place
// placeOf names for its offset in sql. It fails on an event whose kind is
// no number, nor a CASE between two numbers.
func scanKinds(sql string, placeOf func(int) string, out map[string][]int) error {
	for _, m := range kindNumbers.FindAllStringSubmatchIndex(sql, -1) {
		place := placeOf(m[0])
		var found []string
		switch {
		case m[2] >= 0: // counts[…]
			found = []string{sql[m[2]:m[3]]}
		case m[4] >= 0: // the counts' size
			found = []string{sql[m[4]:m[5]]}
		default: // ROW(…)
			fields, end := rowFields(sql, m[1])
			cast := rowCast.FindStringSubmatch(sql[end:])
			switch {
			case cast == nil:
			case cast[1] == "event":
				kind := fields[0]
				if c := caseKinds.FindStringSubmatch(kind); c != nil {
					found = c[1:]
				} else {
					found = []string{kind}
				}
			case cast[1] == "answer" && len(fields) > 13: // the answer's ev_kinds
				for _, a := range arrayKinds.FindAllStringSubmatch(fields[13], -1) {
					found = append(found, a[1])
				}
			}
		}
		for _, f := range found {
			n, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("%s: the kind %q is not a number", place, f)
			}
			out[place] = append(out[place], n)
		}
	}
	return nil
}

// rowFields splits the fields of the ROW whose opening parenthesis ends at
// start, at its top-level commas, and returns them trimmed with the offset
// just past its closing parenthesis.
func rowFields(sql string, start int) ([]string, int) {
	depth, from := 0, start
	var fields []string
	for i := start; i < len(sql); i++ {
		switch sql[i] {
		case '(', '[':
			depth++
		case ')', ']':
			if depth == 0 {
				return append(fields, strings.TrimSpace(sql[from:i])), i + 1
			}
			depth--
		case ',':
			if depth == 0 {
				fields = append(fields, strings.TrimSpace(sql[from:i]))
				from = i + 1
			}
		}
	}
	return fields, len(sql)
}
