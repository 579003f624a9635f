package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Source says where a setting's value came from.
type Source string

// The sources of a value, from the lowest precedence to the highest.
const (
	FromDefault Source = "default"
	FromFile    Source = "file"
	FromEnv     Source = "env"
	FromFlag    Source = "flag"
)

// Sources maps each setting's Key to where its value came from.
type Sources map[string]Source

// LoadOptions are the inputs of Load, besides the embedded defaults.
type LoadOptions struct {
	// File is the path of the TOML file; "" reads none.
	File string
	// Getenv reads the environment (os.Getenv in the daemon); nil reads
	// none.
	Getenv func(string) string
	// Flags holds the flags the user set, by flag name (without dashes),
	// as they spelled them. Only flags set on the command line belong
	// here: a flag's default must not override the file or environment.
	Flags map[string]string
}

// Load builds the configuration from, lowest precedence first: the
// embedded defaults, the TOML file, the WARREN_* environment and the flags.
// It reports where each value came from. It does not Validate.
func Load(opts LoadOptions) (Config, Sources, error) {
	c := Default()
	src := Sources{}
	for _, s := range settings {
		src[s.Key] = FromDefault
	}
	if opts.File != "" {
		b, err := os.ReadFile(opts.File)
		if err != nil {
			return Config{}, nil, fmt.Errorf("config file: %w", err)
		}
		keys, err := c.ApplyTOML(b)
		if err != nil {
			return Config{}, nil, fmt.Errorf("config file %s: %w", opts.File, err)
		}
		for _, k := range keys {
			src[k] = FromFile
		}
	}
	if opts.Getenv != nil {
		keys, err := c.applyEnv(opts.Getenv)
		if err != nil {
			return Config{}, nil, err
		}
		for _, k := range keys {
			src[k] = FromEnv
		}
	}
	for name, v := range opts.Flags {
		s, ok := lookupFlag(name)
		if !ok {
			return Config{}, nil, fmt.Errorf("--%s is not a setting", name)
		}
		if err := s.Set(&c, v); err != nil {
			return Config{}, nil, fmt.Errorf("--%s: %w", name, err)
		}
		src[s.Key] = FromFlag
	}
	return c, src, nil
}

// ApplyEnv overrides c with the WARREN_* variables of every setting
// (getenv is os.Getenv in the daemon). An empty variable counts as unset.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	_, err := c.applyEnv(getenv)
	return err
}

// applyEnv is ApplyEnv, also returning the keys of the settings it set.
func (c *Config) applyEnv(getenv func(string) string) ([]string, error) {
	var keys []string
	for _, s := range settings {
		v := getenv(s.Env)
		if v == "" {
			continue
		}
		if err := s.Set(c, v); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Env, err)
		}
		keys = append(keys, s.Key)
	}
	return keys, nil
}

// ApplyTOML overrides c with the settings of a TOML document and returns
// the keys it set. Unknown keys and tables are errors, each with its line.
func (c *Config) ApplyTOML(doc []byte) ([]string, error) {
	if err := checkKeys(doc); err != nil {
		return nil, err
	}
	v := reflect.New(fileType())
	// checkKeys found every key exact; strict mode stays on in case it
	// missed one.
	dec := toml.NewDecoder(bytes.NewReader(doc)).DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, tomlError(err)
	}
	var keys []string
	for _, s := range settings {
		f := v.Elem()
		for seg := range strings.SplitSeq(s.Key, ".") {
			f = f.FieldByName(fieldName(seg))
		}
		if f.IsNil() {
			continue // not in the document
		}
		switch p := s.field(c).(type) {
		case *string:
			*p = f.Elem().String()
		case *int:
			*p = int(f.Elem().Int())
		case *int64:
			*p = f.Elem().Int()
		case *float64:
			*p = f.Elem().Float()
		case *bool:
			*p = f.Elem().Bool()
		case *time.Duration:
			*p = f.Interface().(*tomlDuration).d
		case *[]string:
			// A copy; an empty array is the empty list (nil), as by default.
			*p = append([]string(nil), *f.Interface().(*[]string)...)
		}
		keys = append(keys, s.Key)
	}
	return keys, nil
}

// tomlDuration is a duration in a TOML document: a string such as "30m".
// It is a struct, not an int64, so that a bare number (nanoseconds? seconds?)
// is an error rather than a guess.
type tomlDuration struct{ d time.Duration }

func (d *tomlDuration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"90s\", \"30m\" or \"24h\"", b)
	}
	d.d = v
	return nil
}

// fileType is the struct type the TOML file decodes into: a field per
// table and per setting, tagged with its TOML name. Settings are pointers,
// so that a nil one was not in the file. It is built from settings, so that
// the file's shape cannot drift from them.
var fileType = sync.OnceValue(func() reflect.Type { return tableType("") })

// tableType returns the struct type of the table prefix ("" for the top
// level, else "session." and so on).
func tableType(prefix string) reflect.Type {
	var fields []reflect.StructField
	seen := map[string]bool{}
	for _, s := range settings {
		rest, ok := strings.CutPrefix(s.Key, prefix)
		if !ok {
			continue
		}
		name, _, nested := strings.Cut(rest, ".")
		if seen[name] {
			continue
		}
		seen[name] = true
		var t reflect.Type
		if nested {
			t = tableType(prefix + name + ".")
		} else {
			switch s.field(&Config{}).(type) {
			case *string:
				t = reflect.TypeFor[*string]()
			case *int, *int64:
				t = reflect.TypeFor[*int64]()
			case *float64:
				t = reflect.TypeFor[*float64]()
			case *bool:
				t = reflect.TypeFor[*bool]()
			case *time.Duration:
				t = reflect.TypeFor[*tomlDuration]()
			case *[]string:
				t = reflect.TypeFor[*[]string]()
			}
		}
		fields = append(fields, reflect.StructField{Name: fieldName(name), Type: t, Tag: reflect.StructTag(`toml:"` + name + `"`)})
	}
	return reflect.StructOf(fields)
}

// fieldName is the Go field of fileType for the TOML name: exported, and
// unique because TOML names are.
func fieldName(name string) string { return "X_" + name }

// checkKeys reports every key and table of doc that is not a setting or a
// table of them, and every value of the wrong kind, each with its line.
// go-toml's strict mode alone would not do: it matches keys to fields
// regardless of case, and TOML keys are case-sensitive ("Listen" is not a
// setting); and its type errors name fileType's Go types. Syntax errors are
// left to the decoder, which reports them better.
func checkKeys(doc []byte) error {
	keys, tables := map[string]Setting{}, map[string]bool{}
	for _, s := range settings {
		keys[s.Key] = s
		for k := s.Key; strings.Contains(k, "."); {
			k = k[:strings.LastIndexByte(k, '.')]
			tables[k] = true
		}
	}
	var p unstable.Parser
	p.Reset(doc)
	var errs []error
	report := func(n *unstable.Node, format string, args ...any) {
		line := p.Shape(n.Raw).Start.Line
		errs = append(errs, fmt.Errorf("line %d: "+format, append([]any{line}, args...)...))
	}
	unknown := func(n *unstable.Node, k, what string) {
		hint := ""
		for known := range keys {
			if strings.EqualFold(known, k) {
				hint = " (did you mean " + known + "?)"
			}
		}
		for known := range tables {
			if strings.EqualFold(known, k) {
				hint = " (did you mean " + known + "?)"
			}
		}
		report(n, "unknown %s %s%s", what, k, hint)
	}
	// keyval checks a key-value, or a key-value of an inline table, under
	// the table path.
	var keyval func(table []string, n *unstable.Node)
	keyval = func(table []string, n *unstable.Node) {
		path, first := keyPath(table, n)
		k, v := strings.Join(path, "."), n.Value()
		s, isKey := keys[k]
		switch {
		case tables[k] && v.Kind == unstable.InlineTable:
			for it := v.Children(); it.Next(); {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					keyval(path, c)
				}
			}
		case tables[k]:
			report(first, "%s: is a TOML %s, want a table", k, kindName(v.Kind))
		case !isKey:
			unknown(first, k, "key")
		case !fits(s, v.Kind):
			report(first, "%s: is a TOML %s, want %s", k, kindName(v.Kind), want(s))
		}
	}
	var table []string
	tableOK := true
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var first *unstable.Node
			table, first = keyPath(nil, e)
			k := strings.Join(table, ".")
			tableOK = tables[k] && e.Kind == unstable.Table
			switch {
			case tables[k] && e.Kind == unstable.ArrayTable:
				report(first, "[[%s]]: %s is a table, not an array of tables", k, k)
			case keys[k].Key != "":
				report(first, "[%s]: %s is a setting, not a table", k, k)
			case !tables[k]:
				unknown(first, k, "table")
			}
		case unstable.KeyValue:
			if tableOK { // else the table's error says it all
				keyval(table, e)
			}
		}
	}
	if p.Error() != nil {
		return nil // the decoder says what is wrong, and where
	}
	return errors.Join(errs...)
}

// fits reports whether a TOML value of kind k can hold the setting.
func fits(s Setting, k unstable.Kind) bool {
	switch s.Type() {
	case "string", "duration":
		return k == unstable.String
	case "int":
		return k == unstable.Integer
	case "float":
		return k == unstable.Float || k == unstable.Integer
	case "bool":
		return k == unstable.Bool
	case "list":
		return k == unstable.Array
	}
	return false
}

// kindName names a kind of TOML value as the TOML spec does.
func kindName(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "string"
	case unstable.Integer:
		return "integer"
	case unstable.Float:
		return "float"
	case unstable.Bool:
		return "boolean"
	case unstable.Array:
		return "array"
	case unstable.InlineTable:
		return "table"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "date-time"
	}
	return strings.ToLower(k.String())
}

// want describes the TOML value the setting takes.
func want(s Setting) string {
	switch s.Type() {
	case "string":
		return "a string"
	case "int":
		return "a whole number"
	case "float":
		return "a number"
	case "bool":
		return "true or false"
	case "duration":
		return `a duration string such as "90s", "30m" or "24h"`
	case "list":
		return "an array of strings"
	}
	return "a value"
}

// keyPath returns the full key of n (a table header or key-value) under
// table, and n's first key node, where the key starts.
func keyPath(table []string, n *unstable.Node) ([]string, *unstable.Node) {
	path := append([]string(nil), table...)
	var first *unstable.Node
	for it := n.Key(); it.Next(); {
		if first == nil {
			first = it.Node()
		}
		path = append(path, string(it.Node().Data))
	}
	return path, first
}

// tomlError rewrites go-toml's errors as one line per problem, each with
// its line: "line 3: unknown key session.max_sesions".
func tomlError(err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var errs []error
		for _, e := range strict.Errors {
			line, _ := e.Position()
			errs = append(errs, fmt.Errorf("line %d: unknown key %s", line, strings.Join(e.Key(), ".")))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 {
			return fmt.Errorf("line %d: %s: %s", line, strings.Join(k, "."), msg)
		}
		return fmt.Errorf("line %d: %s", line, msg)
	}
	return err
}
