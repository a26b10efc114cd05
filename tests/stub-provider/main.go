// A stand-in for a third-party provider that cannot be installed where the examples are tested
// (no registry access). It serves, over the real plugin protocol 6, a schema read from a JSON file
// in the shape of `tofu providers schema -json` (one provider), transcribed from that provider's
// published documentation. It answers the validation calls and nothing else: `tofu init` and
// `tofu validate` of an example check every talosboot attribute against the real talosboot and
// every reference to the other provider against the transcribed schema; `plan` and `apply` are
// refused, so a test cannot pretend the other provider ran.
//
// Usage: the schema file is named by STUB_PROVIDER_SCHEMA, or is `schema.json` beside the binary.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

type jsonAttr struct {
	Type       json.RawMessage `json:"type"`
	NestedType *struct {
		Attributes  map[string]jsonAttr `json:"attributes"`
		NestingMode string              `json:"nesting_mode"`
	} `json:"nested_type"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	Optional    bool   `json:"optional"`
	Computed    bool   `json:"computed"`
	Sensitive   bool   `json:"sensitive"`
	WriteOnly   bool   `json:"write_only"`
}

type jsonBlockType struct {
	NestingMode string    `json:"nesting_mode"`
	Block       jsonBlock `json:"block"`
	MinItems    int64     `json:"min_items"`
	MaxItems    int64     `json:"max_items"`
}

type jsonBlock struct {
	Attributes map[string]jsonAttr      `json:"attributes"`
	BlockTypes map[string]jsonBlockType `json:"block_types"`
}

type jsonSchema struct {
	Block jsonBlock `json:"block"`
}

type jsonProvider struct {
	Provider                 jsonSchema            `json:"provider"`
	ResourceSchemas          map[string]jsonSchema `json:"resource_schemas"`
	DataSourceSchemas        map[string]jsonSchema `json:"data_source_schemas"`
	EphemeralResourceSchemas map[string]jsonSchema `json:"ephemeral_resource_schemas"`
}

func ctyType(raw json.RawMessage) (tftypes.Type, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		switch name {
		case "string":
			return tftypes.String, nil
		case "number":
			return tftypes.Number, nil
		case "bool":
			return tftypes.Bool, nil
		case "dynamic":
			return tftypes.DynamicPseudoType, nil
		}
		return nil, fmt.Errorf("unknown type %q", name)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) < 2 {
		return nil, fmt.Errorf("bad type %s", raw)
	}
	var kind string
	if err := json.Unmarshal(parts[0], &kind); err != nil {
		return nil, err
	}
	switch kind {
	case "list", "set", "map":
		elem, err := ctyType(parts[1])
		if err != nil {
			return nil, err
		}
		switch kind {
		case "list":
			return tftypes.List{ElementType: elem}, nil
		case "set":
			return tftypes.Set{ElementType: elem}, nil
		}
		return tftypes.Map{ElementType: elem}, nil
	case "object":
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(parts[1], &fields); err != nil {
			return nil, err
		}
		obj := tftypes.Object{AttributeTypes: map[string]tftypes.Type{}}
		for k, v := range fields {
			t, err := ctyType(v)
			if err != nil {
				return nil, err
			}
			obj.AttributeTypes[k] = t
		}
		if len(parts) > 2 {
			var optional []string
			if err := json.Unmarshal(parts[2], &optional); err != nil {
				return nil, err
			}
			obj.OptionalAttributes = map[string]struct{}{}
			for _, o := range optional {
				obj.OptionalAttributes[o] = struct{}{}
			}
		}
		return obj, nil
	case "tuple":
		var elems []json.RawMessage
		if err := json.Unmarshal(parts[1], &elems); err != nil {
			return nil, err
		}
		tuple := tftypes.Tuple{}
		for _, e := range elems {
			t, err := ctyType(e)
			if err != nil {
				return nil, err
			}
			tuple.ElementTypes = append(tuple.ElementTypes, t)
		}
		return tuple, nil
	}
	return nil, fmt.Errorf("unknown type %s", raw)
}

func nesting(mode string) (tfprotov6.SchemaObjectNestingMode, error) {
	switch mode {
	case "single":
		return tfprotov6.SchemaObjectNestingModeSingle, nil
	case "list":
		return tfprotov6.SchemaObjectNestingModeList, nil
	case "set":
		return tfprotov6.SchemaObjectNestingModeSet, nil
	case "map":
		return tfprotov6.SchemaObjectNestingModeMap, nil
	}
	return 0, fmt.Errorf("unknown nesting mode %q", mode)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func attributes(attrs map[string]jsonAttr) ([]*tfprotov6.SchemaAttribute, error) {
	var out []*tfprotov6.SchemaAttribute
	for _, name := range sortedKeys(attrs) {
		a := attrs[name]
		sa := &tfprotov6.SchemaAttribute{
			Name:        name,
			Description: a.Description,
			Required:    a.Required,
			Optional:    a.Optional,
			Computed:    a.Computed,
			Sensitive:   a.Sensitive,
			WriteOnly:   a.WriteOnly,
		}
		if a.NestedType != nil {
			inner, err := attributes(a.NestedType.Attributes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			mode, err := nesting(a.NestedType.NestingMode)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			sa.NestedType = &tfprotov6.SchemaObject{Attributes: inner, Nesting: mode}
		} else {
			t, err := ctyType(a.Type)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			sa.Type = t
		}
		out = append(out, sa)
	}
	return out, nil
}

func block(b jsonBlock) (*tfprotov6.SchemaBlock, error) {
	attrs, err := attributes(b.Attributes)
	if err != nil {
		return nil, err
	}
	out := &tfprotov6.SchemaBlock{Attributes: attrs}
	for _, name := range sortedKeys(b.BlockTypes) {
		bt := b.BlockTypes[name]
		inner, err := block(bt.Block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		nb := &tfprotov6.SchemaNestedBlock{TypeName: name, Block: inner, MinItems: bt.MinItems, MaxItems: bt.MaxItems}
		switch bt.NestingMode {
		case "single":
			nb.Nesting = tfprotov6.SchemaNestedBlockNestingModeSingle
		case "list":
			nb.Nesting = tfprotov6.SchemaNestedBlockNestingModeList
		case "set":
			nb.Nesting = tfprotov6.SchemaNestedBlockNestingModeSet
		default:
			return nil, fmt.Errorf("%s: unknown nesting mode %q", name, bt.NestingMode)
		}
		out.BlockTypes = append(out.BlockTypes, nb)
	}
	return out, nil
}

type stub struct {
	// Methods a validate never calls are left to the nil interface (they would panic, and
	// plan/apply are refused before that in PlanResourceChange and ReadDataSource).
	tfprotov6.ProviderServer
	schema *tfprotov6.GetProviderSchemaResponse
}

func (s *stub) GetMetadata(context.Context, *tfprotov6.GetMetadataRequest) (*tfprotov6.GetMetadataResponse, error) {
	resp := &tfprotov6.GetMetadataResponse{ServerCapabilities: &tfprotov6.ServerCapabilities{}}
	for name := range s.schema.ResourceSchemas {
		resp.Resources = append(resp.Resources, tfprotov6.ResourceMetadata{TypeName: name})
	}
	for name := range s.schema.DataSourceSchemas {
		resp.DataSources = append(resp.DataSources, tfprotov6.DataSourceMetadata{TypeName: name})
	}
	return resp, nil
}

func (s *stub) GetProviderSchema(context.Context, *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	return s.schema, nil
}

func (s *stub) GetResourceIdentitySchemas(context.Context, *tfprotov6.GetResourceIdentitySchemasRequest) (*tfprotov6.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov6.GetResourceIdentitySchemasResponse{}, nil
}

func (s *stub) ValidateProviderConfig(_ context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	return &tfprotov6.ValidateProviderConfigResponse{PreparedConfig: req.Config}, nil
}

func (s *stub) ValidateResourceConfig(context.Context, *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	return &tfprotov6.ValidateResourceConfigResponse{}, nil
}

func (s *stub) ValidateDataResourceConfig(context.Context, *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	return &tfprotov6.ValidateDataResourceConfigResponse{}, nil
}

func (s *stub) ValidateEphemeralResourceConfig(context.Context, *tfprotov6.ValidateEphemeralResourceConfigRequest) (*tfprotov6.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov6.ValidateEphemeralResourceConfigResponse{}, nil
}

func refused() []*tfprotov6.Diagnostic {
	return []*tfprotov6.Diagnostic{{
		Severity: tfprotov6.DiagnosticSeverityError,
		Summary:  "Stub provider",
		Detail:   "This is a schema-only stand-in used to validate examples; it cannot configure, plan or apply.",
	}}
}

func (s *stub) ConfigureProvider(context.Context, *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	return &tfprotov6.ConfigureProviderResponse{Diagnostics: refused()}, nil
}

func (s *stub) PlanResourceChange(context.Context, *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	return &tfprotov6.PlanResourceChangeResponse{Diagnostics: refused()}, nil
}

func (s *stub) ReadDataSource(context.Context, *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	return &tfprotov6.ReadDataSourceResponse{Diagnostics: refused()}, nil
}

func (s *stub) StopProvider(context.Context, *tfprotov6.StopProviderRequest) (*tfprotov6.StopProviderResponse, error) {
	return &tfprotov6.StopProviderResponse{}, nil
}

func load(path string) (*tfprotov6.GetProviderSchemaResponse, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p jsonProvider
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	provider, err := block(p.Provider.Block)
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	resp := &tfprotov6.GetProviderSchemaResponse{
		ServerCapabilities:       &tfprotov6.ServerCapabilities{},
		Provider:                 &tfprotov6.Schema{Block: provider},
		ResourceSchemas:          map[string]*tfprotov6.Schema{},
		DataSourceSchemas:        map[string]*tfprotov6.Schema{},
		Functions:                map[string]*tfprotov6.Function{},
		EphemeralResourceSchemas: map[string]*tfprotov6.Schema{},
	}
	for name, s := range p.ResourceSchemas {
		b, err := block(s.Block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		resp.ResourceSchemas[name] = &tfprotov6.Schema{Block: b}
	}
	for name, s := range p.DataSourceSchemas {
		b, err := block(s.Block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		resp.DataSourceSchemas[name] = &tfprotov6.Schema{Block: b}
	}
	for name, s := range p.EphemeralResourceSchemas {
		b, err := block(s.Block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		resp.EphemeralResourceSchemas[name] = &tfprotov6.Schema{Block: b}
	}
	return resp, nil
}

func main() {
	path := os.Getenv("STUB_PROVIDER_SCHEMA")
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		path = filepath.Join(filepath.Dir(exe), "schema.json")
	}
	schema, err := load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub provider:", err)
		os.Exit(1)
	}
	err = tf6server.Serve("stub", func() tfprotov6.ProviderServer { return &stub{schema: schema} })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
