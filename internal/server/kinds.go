package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/httpapi"
	"github.com/rotahq/rota/internal/store"
)

// KindSpec is one kind declared in a kinds file (Config.KindsFile): its
// name and the settings of PUT /api/kinds/{kind}, with the same names,
// rules and meaning. A setting left out keeps the kind's current value (the
// default for a new kind); a setting given is applied at every start of
// every node, so the file wins over a change made since through the API
// or the UI (pause a declared kind with paused left out of the file).
type KindSpec struct {
	Name             string   `json:"name"`
	PriorityFactor   *int     `json:"priority_factor,omitempty"`
	Paused           *bool    `json:"paused,omitempty"`
	MaxRunning       *int     `json:"max_running,omitempty"`
	Rate             *float64 `json:"rate,omitempty"`
	RetentionSeconds *int     `json:"retention_seconds,omitempty"`
	Dispatch         *string  `json:"dispatch,omitempty"`
}

// kindSpecFields are the JSON names of KindSpec's fields: an entry with
// another key (or one that differs only by case) is refused.
var kindSpecFields = []string{"name", "priority_factor", "paused", "max_running", "rate", "retention_seconds", "dispatch"}

// kindsFile is the document of a kinds file:
//
//	{"kinds": [{"name": "email", "priority_factor": 3, "max_running": 10}, …]}
//
// or the same in YAML (a file named *.yaml or *.yml).
type kindsFile struct {
	Kinds []json.RawMessage `json:"kinds"`
}

// LoadKindsFile reads and checks a kinds file: JSON, or YAML when its name
// ends in .yaml or .yml. Every error names the file and, for a bad entry,
// the entry (kinds[2] "email": …) and its field.
func LoadKindsFile(path string) ([]KindSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kinds file: %w", err)
	}
	specs, err := parseKinds(b, isYAML(path))
	if err != nil {
		return nil, fmt.Errorf("kinds file %s: %w", path, err)
	}
	return specs, nil
}

func isYAML(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

// parseKinds decodes and checks the document of a kinds file.
func parseKinds(b []byte, fromYAML bool) ([]KindSpec, error) {
	if fromYAML {
		j, err := yaml.YAMLToJSONStrict(b)
		if err != nil {
			return nil, fmt.Errorf("not valid YAML: %w", err)
		}
		b = j
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc kindsFile
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf(`want {"kinds": [{"name": …, settings…}, …]}: %w`, err)
	}
	if dec.More() {
		return nil, errors.New("data after the document")
	}
	if len(doc.Kinds) == 0 {
		return nil, errors.New(`"kinds" is missing or empty: declare at least one kind`)
	}
	specs := make([]KindSpec, len(doc.Kinds))
	seen := map[string]int{}
	for i, raw := range doc.Kinds {
		at := fmt.Sprintf("kinds[%d]", i)
		sp, err := parseKindSpec(raw)
		if sp.Name != "" {
			at += fmt.Sprintf(" %q", sp.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if j, dup := seen[sp.Name]; dup {
			return nil, fmt.Errorf("%s: declared again (first at kinds[%d])", at, j)
		}
		seen[sp.Name] = i
		specs[i] = sp
	}
	return specs, nil
}

// parseKindSpec decodes and checks one entry.
func parseKindSpec(raw json.RawMessage) (KindSpec, error) {
	var sp KindSpec
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return sp, errors.New(`want an object {"name": …, settings…}`)
	}
	_ = json.Unmarshal(fields["name"], &sp.Name) // for the messages below; checked after
	for k := range fields {
		if !slices.Contains(kindSpecFields, k) {
			return sp, fmt.Errorf("unknown field %q (known: %s)", k, strings.Join(kindSpecFields, ", "))
		}
	}
	if err := json.Unmarshal(raw, &sp); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return sp, fmt.Errorf("%s: want a %s, got %s", te.Field, te.Type, te.Value)
		}
		return sp, err
	}
	if !rota.ValidKind(sp.Name) {
		return sp, fmt.Errorf("name %q: want %s", sp.Name, rota.KindPattern)
	}
	if err := httpapi.CheckKindSettings("", sp.params()); err != nil {
		var re *rota.Error
		if errors.As(err, &re) && re.Field != "" {
			return sp, fmt.Errorf("%s %s", re.Field, re.Message)
		}
		return sp, err
	}
	return sp, nil
}

// params is the upsert that applies sp.
func (sp KindSpec) params() store.KindUpsertParams {
	return store.KindUpsertParams{
		Name: sp.Name, PriorityFactor: sp.PriorityFactor, Paused: sp.Paused,
		MaxRunning: sp.MaxRunning, Rate: sp.Rate, RetentionSeconds: sp.RetentionSeconds, Dispatch: sp.Dispatch,
	}
}

// matches reports whether k already has every setting sp gives.
func (sp KindSpec) matches(k *rota.Kind) bool {
	return (sp.PriorityFactor == nil || *sp.PriorityFactor == k.PriorityFactor) &&
		(sp.Paused == nil || *sp.Paused == k.Paused) &&
		(sp.MaxRunning == nil || *sp.MaxRunning == k.MaxRunning) &&
		(sp.Rate == nil || *sp.Rate == k.Rate) &&
		(sp.RetentionSeconds == nil || *sp.RetentionSeconds == k.RetentionSeconds) &&
		(sp.Dispatch == nil || *sp.Dispatch == k.Dispatch)
}

// declaredKinds are the kinds of Config.KindsFile. Immutable after
// loadKinds.
type declaredKinds struct {
	specs  []KindSpec
	names  map[string]bool
	strict bool // refuse submits of other kinds
}

// loadKinds loads cfg.KindsFile; nil when there is none. StrictKinds
// without a kinds file is an error: it would refuse every submit.
func loadKinds(cfg Config) (*declaredKinds, error) {
	if cfg.KindsFile == "" {
		if cfg.StrictKinds {
			return nil, errors.New("strict kinds need a kinds file: give --kinds-file with --strict-kinds")
		}
		return nil, nil
	}
	specs, err := LoadKindsFile(cfg.KindsFile)
	if err != nil {
		return nil, err
	}
	d := &declaredKinds{specs: specs, names: make(map[string]bool, len(specs)), strict: cfg.StrictKinds}
	for _, sp := range specs {
		d.names[sp.Name] = true
	}
	return d, nil
}

// acceptKind is the httpapi.Config.AcceptKind of d: nil (every kind) unless
// strict.
func (d *declaredKinds) acceptKind() func(kind string) bool {
	if d == nil || !d.strict {
		return nil
	}
	return func(kind string) bool { return d.names[kind] }
}

// applyKinds writes the declared kinds' settings to the store, through the
// dispatcher (which wakes the kinds' workers). A kind that already has its
// declared settings is left alone, so that the start of every node of a
// cluster, each applying the same file, changes nothing more than the first
// did.
// It returns the names of the kinds it changed.
func (s *Server) applyKinds(ctx context.Context) ([]string, error) {
	if s.kinds == nil {
		return nil, nil
	}
	var changed []string
	for _, sp := range s.kinds.specs {
		k, err := s.store.KindGet(ctx, sp.Name)
		switch {
		case err == nil && sp.matches(k):
			continue
		case err != nil && !errors.Is(err, rota.ErrNotFound):
			return changed, fmt.Errorf("kinds file %s: kind %q: %w", s.cfg.KindsFile, sp.Name, err)
		}
		if _, err := s.disp.KindUpsert(ctx, sp.params()); err != nil {
			return changed, fmt.Errorf("kinds file %s: apply kind %q: %w", s.cfg.KindsFile, sp.Name, err)
		}
		changed = append(changed, sp.Name)
	}
	s.cfg.Logger.Info("kinds file applied", "file", s.cfg.KindsFile, "declared", len(s.kinds.specs),
		"changed", changed, "strict", s.kinds.strict)
	return changed, nil
}
