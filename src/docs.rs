//! Registry documentation rendered from the schema, so descriptions have a single source.
//!
//! `tests/docs.rs` compares `docs/` with this rendering and rewrites it when run with
//! `TALOSBOOT_UPDATE_DOCS=1`: a schema change without a docs update fails the tests. The pages'
//! frontmatter `description` is the first sentence of the type's description ([`first_sentence`]),
//! which `tests/docs.rs` checks is a whole sentence.

use std::fmt::Write;

use crate::framework::{Attribute, AttributeType, Block, NestedBlock, Nesting, Schema, Signature};
use crate::values::Type;

/// `docs/index.md`.
pub fn provider_page(schema: &Schema, example: &str, guide: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "---\npage_title: \"talosboot Provider\"\ndescription: |-\n  Bootstraps Cilium and Flux on a fresh Talos cluster.\n---\n"
    );
    let _ = writeln!(out, "# talosboot Provider\n\n{guide}\n");
    let _ = writeln!(out, "{}\n", schema.block.description);
    let _ = writeln!(
        out,
        "## Example Usage\n\n```terraform\n{}\n```\n",
        example.trim_end()
    );
    render_attributes(&mut out, &schema.block);
    out
}

/// `docs/resources/<name>.md` or `docs/data-sources/<name>.md`.
pub fn type_page(
    kind: &str,
    type_name: &str,
    schema: &Schema,
    example: &str,
    import: Option<&str>,
    import_by_identity: Option<&str>,
) -> String {
    let subcategory = "";
    let mut out = String::new();
    let _ = writeln!(
        out,
        "---\npage_title: \"{type_name} {kind} - talosboot\"\nsubcategory: \"{subcategory}\"\ndescription: |-\n  {}\n---\n",
        first_sentence(&schema.block.description)
    );
    let _ = writeln!(
        out,
        "# {type_name} ({kind})\n\n{}\n",
        schema.block.description
    );
    let _ = writeln!(
        out,
        "## Example Usage\n\n```terraform\n{}\n```\n",
        example.trim_end()
    );
    render_attributes(&mut out, &schema.block);
    if let Some(import) = import {
        let _ = writeln!(
            out,
            "## Import\n\nImport is supported using the following syntax:\n\n```shell\n{}\n```",
            import.trim_end()
        );
    }
    if let Some(by_identity) = import_by_identity {
        let _ = writeln!(
            out,
            "\nOn Terraform 1.12 and later, an `import` block can name the resource by its identity instead of the ID (OpenTofu takes the ID):\n\n```terraform\n{}\n```",
            by_identity.trim_end()
        );
    }
    out
}

/// The first sentence of `text`, with its full stop: the frontmatter `description` a registry
/// shows in its lists. A sentence ends at `. ` or at the end of the first paragraph, never inside
/// a code span (`` `a. b` ``), so the result keeps its backticks balanced.
pub fn first_sentence(text: &str) -> String {
    let paragraph = text.split("\n\n").next().unwrap_or(text).trim();
    let mut in_code = false;
    let mut end = paragraph.len();
    let bytes = paragraph.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'`' => in_code = !in_code,
            b'.' if !in_code && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace) => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let sentence = paragraph[..end].trim_end_matches('.').trim_end();
    format!("{sentence}.")
}

/// `docs/functions/<name>.md`: the page tfplugindocs writes for a provider-defined function
/// (summary, description, example, signature, arguments).
pub fn function_page(name: &str, signature: &Signature, example: &str) -> String {
    let mut out = String::new();
    let summary = if signature.summary.is_empty() {
        first_sentence(&signature.description)
    } else {
        first_sentence(&signature.summary)
    };
    let _ = writeln!(
        out,
        "---\npage_title: \"{name} function - talosboot\"\nsubcategory: \"\"\ndescription: |-\n  {summary}\n---\n"
    );
    let _ = writeln!(out, "# function: {name}\n\n{}\n", signature.description);
    let _ = writeln!(
        out,
        "## Example Usage\n\n```terraform\n{}\n```\n",
        example.trim_end()
    );
    let mut params: Vec<String> = signature
        .parameters
        .iter()
        .map(|p| format!("{} {}", p.name, hcl_type(&p.ty)))
        .collect();
    if let Some(v) = &signature.variadic {
        params.push(format!("{}... {}", v.name, hcl_type(&v.ty)));
    }
    let _ = writeln!(
        out,
        "## Signature\n\n<!-- signature generated from the provider's function signature; edit it in src/functions/ -->\n```text\n{name}({}) {}\n```\n",
        params.join(", "),
        hcl_type(&signature.return_type)
    );
    let _ = writeln!(out, "## Arguments\n");
    if signature.parameters.is_empty() && signature.variadic.is_none() {
        let _ = writeln!(out, "None.\n");
    }
    for (i, p) in signature
        .parameters
        .iter()
        .chain(signature.variadic.iter())
        .enumerate()
    {
        let nullable = if p.allow_null { ", Nullable" } else { "" };
        let _ = writeln!(
            out,
            "{}. `{}` ({}{nullable}) {}",
            i + 1,
            p.name,
            cty_label(&p.ty),
            p.description
        );
    }
    if !signature.parameters.is_empty() || signature.variadic.is_some() {
        out.push('\n');
    }
    if !signature.deprecation.is_empty() {
        let _ = writeln!(out, "~> **Deprecated:** {}\n", signature.deprecation);
    }
    out
}

/// A type as configuration writes it (`string`, `list(string)`, `object`).
fn hcl_type(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::Number => "number".into(),
        Type::String => "string".into(),
        Type::Dynamic => "dynamic".into(),
        Type::List(e) => format!("list({})", hcl_type(e)),
        Type::Set(e) => format!("set({})", hcl_type(e)),
        Type::Map(e) => format!("map({})", hcl_type(e)),
        Type::Object { .. } => "object".into(),
        Type::Tuple(_) => "tuple".into(),
    }
}

fn render_attributes(out: &mut String, block: &Block) {
    let _ = writeln!(
        out,
        "<!-- schema generated from the provider's schema; edit the descriptions in src/ -->\n## Schema\n"
    );
    render_sections(out, &block.attributes, true, "");
    render_blocks(out, &block.blocks);
    render_nested(out, &block.attributes, "");
    for b in &block.blocks {
        let _ = writeln!(
            out,
            "<a id=\"nestedblock--{0}\"></a>\n### Nested Schema for `{0}`\n",
            b.type_name
        );
        let prefix = format!("{}--", b.type_name);
        render_sections(out, &b.block.attributes, false, &prefix);
        render_nested(out, &b.block.attributes, &prefix);
    }
}

/// The nested blocks of the top level (`cluster { ... }`), as tfplugindocs lists them: under
/// "Blocks", each linking to its own section (`nestedblock--<name>`).
fn render_blocks(out: &mut String, blocks: &[NestedBlock]) {
    if blocks.is_empty() {
        return;
    }
    let _ = writeln!(out, "### Blocks\n");
    for b in blocks {
        let kind = match b.nesting {
            Nesting::Single | Nesting::Group => "Block",
            Nesting::List => "Block List",
            Nesting::Set => "Block Set",
            Nesting::Map => "Block Map",
        };
        let limit = match (b.min_items, b.max_items) {
            (0, 1) | (0, 0) => ", Optional".to_owned(),
            (min, 0) => format!(", Min: {min}"),
            (min, max) => format!(", Min: {min}, Max: {max}"),
        };
        let _ = writeln!(
            out,
            "- `{0}` ({kind}{limit}) {1} (see [below for nested schema](#nestedblock--{0}))",
            b.type_name, b.block.description
        );
    }
    out.push('\n');
}

/// The Required / Optional / Read-Only lists of one object level (headings at the top level, labels
/// inside nested sections); nested attributes link to their own section (`nestedatt--<path>`, as
/// tfplugindocs writes it).
fn render_sections(out: &mut String, attributes: &[Attribute], top: bool, prefix: &str) {
    type Filter = fn(&Attribute) -> bool;
    let sections: [(&str, Filter); 3] = [
        ("Required", |a| a.required),
        ("Optional", |a| a.optional),
        ("Read-Only", |a| a.computed && !a.optional),
    ];
    for (title, pred) in sections {
        let selected: Vec<&Attribute> = attributes.iter().filter(|a| pred(a)).collect();
        if selected.is_empty() {
            continue;
        }
        if top {
            let _ = writeln!(out, "### {title}\n");
        } else {
            let _ = writeln!(out, "{title}:\n");
        }
        for a in selected {
            let mut flags = Vec::new();
            if a.sensitive {
                flags.push("Sensitive");
            }
            if a.write_only {
                flags.push("Write-only");
            }
            if a.deprecated.is_some() {
                flags.push("Deprecated");
            }
            let flags = if flags.is_empty() {
                String::new()
            } else {
                format!(", {}", flags.join(", "))
            };
            let link = match a.ty {
                AttributeType::Nested { .. } => format!(
                    " (see [below for nested schema](#nestedatt--{prefix}{}))",
                    a.name
                ),
                AttributeType::Type(_) => String::new(),
            };
            let _ = writeln!(
                out,
                "- `{}` ({}{flags}) {}{link}",
                a.name,
                type_label(a),
                a.description
            );
        }
        out.push('\n');
    }
}

/// A section per nested attribute, depth first (`job`, then `job--tolerations`).
fn render_nested(out: &mut String, attributes: &[Attribute], prefix: &str) {
    for a in attributes {
        let AttributeType::Nested {
            attributes: inner, ..
        } = &a.ty
        else {
            continue;
        };
        let anchor = format!("{prefix}{}", a.name);
        let _ = writeln!(
            out,
            "<a id=\"nestedatt--{anchor}\"></a>\n### Nested Schema for `{}`\n",
            anchor.replace("--", ".")
        );
        let inner_prefix = format!("{anchor}--");
        render_sections(out, inner, false, &inner_prefix);
        render_nested(out, inner, &inner_prefix);
    }
}

fn type_label(a: &Attribute) -> String {
    match &a.ty {
        AttributeType::Type(ty) => cty_label(ty),
        AttributeType::Nested { nesting, .. } => match nesting {
            Nesting::Single | Nesting::Group => "Attributes".into(),
            Nesting::List => "Attributes List".into(),
            Nesting::Set => "Attributes Set".into(),
            Nesting::Map => "Attributes Map".into(),
        },
    }
}

fn cty_label(ty: &Type) -> String {
    match ty {
        Type::Bool => "Boolean".into(),
        Type::Number => "Number".into(),
        Type::String => "String".into(),
        Type::Dynamic => "Dynamic".into(),
        Type::List(e) => format!("List of {}", cty_label(e)),
        Type::Set(e) => format!("Set of {}", cty_label(e)),
        Type::Map(e) => format!("Map of {}", cty_label(e)),
        Type::Object { .. } => "Object".into(),
        Type::Tuple(_) => "Tuple".into(),
    }
}
