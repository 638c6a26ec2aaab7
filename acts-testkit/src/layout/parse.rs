//! Reading a crate's sources into its modules: what each module defines,
//! what it binds with `use` (and whether it re-exports it), which paths its
//! code names, and the `May use:` line of its documentation.
//!
//! Every file reachable from the crate root through `mod` declarations is
//! read whole; items marked `#[cfg(test)]` (test modules, test helpers) are
//! left out precisely, so code written after a test module is read like
//! any other.
//!
//! May use: `error` (the error a source that cannot be read or parsed is).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use super::error::LayoutError;

/// A module's path below the crate root (`engine::kernel`; the root is
/// empty).
pub type ModPath = Vec<String>;

/// A name a module binds with `use`.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    /// The path the name stands for, as written (`crate::a::B`, `super::x`).
    pub(crate) path: Vec<String>,
}

/// One module of the crate: a file, or an inline `mod name { … }` in one.
#[derive(Debug, Default)]
pub(crate) struct Module {
    /// The module of the file this module is written in.
    pub(crate) file: ModPath,
    /// Whether this is a folder's `mod.rs` (or the crate root).
    pub(crate) folder: bool,
    /// The child modules it declares.
    pub(crate) children: BTreeSet<String>,
    /// The names of the items it defines.
    pub(crate) items: BTreeSet<String>,
    /// The names it binds with `use` (re-exported or not).
    pub(crate) bindings: BTreeMap<String, Binding>,
    /// The paths of its glob imports (`use a::*`).
    pub(crate) globs: Vec<Vec<String>>,
    /// The paths its code names: in signatures, bodies, macro calls and its
    /// own (not re-exported) `use` lines.
    pub(crate) refs: Vec<Vec<String>>,
    /// The methods its code calls (`x.name(..)`), by name.
    pub(crate) methods: BTreeSet<String>,
    /// The text of its documentation's `May use:` paragraph, if it has one.
    pub(crate) may_use: Option<String>,
    /// The file it was read from.
    pub(crate) source: PathBuf,
}

/// Reads the crate whose root file is `root` (a `lib.rs` or `main.rs`).
pub(crate) fn read_crate(root: &Path) -> Result<BTreeMap<ModPath, Module>, LayoutError> {
    let mut modules = BTreeMap::new();
    let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
    read_file(root, Vec::new(), dir, true, &mut modules)?;
    Ok(modules)
}

fn read_file(
    path: &Path,
    module: ModPath,
    children_dir: PathBuf,
    folder: bool,
    out: &mut BTreeMap<ModPath, Module>,
) -> Result<(), LayoutError> {
    let text = std::fs::read_to_string(path).map_err(|source| LayoutError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file = syn::parse_file(&text).map_err(|e| LayoutError::Parse {
        path: path.to_path_buf(),
        line: e.span().start().line,
        message: e.to_string(),
    })?;
    let mut me = Module {
        file: module.clone(),
        folder,
        may_use: may_use_line(&file.attrs),
        source: path.to_path_buf(),
        ..Module::default()
    };
    let mut nested = Vec::new();
    read_items(&file.items, &module, &mut me, &children_dir, &mut nested);
    out.insert(module.clone(), me);
    for child in nested {
        read_nested(child, &module, out)?;
    }
    Ok(())
}

/// A child module found while reading a module: written inline, or in a
/// file of its own.
enum Nested {
    Inline {
        name: String,
        module: Module,
        nested: Vec<Nested>,
    },
    File {
        name: String,
        path: PathBuf,
        children_dir: PathBuf,
        folder: bool,
    },
}

fn read_nested(
    nested: Nested,
    parent: &ModPath,
    out: &mut BTreeMap<ModPath, Module>,
) -> Result<(), LayoutError> {
    match nested {
        Nested::Inline {
            name,
            module,
            nested,
        } => {
            let mut path = parent.clone();
            path.push(name);
            out.insert(path.clone(), module);
            for child in nested {
                read_nested(child, &path, out)?;
            }
            Ok(())
        }
        Nested::File {
            name,
            path,
            children_dir,
            folder,
        } => {
            let mut module = parent.clone();
            module.push(name);
            read_file(&path, module, children_dir, folder, out)
        }
    }
}

fn read_items(
    items: &[syn::Item],
    module: &ModPath,
    me: &mut Module,
    children_dir: &Path,
    nested: &mut Vec<Nested>,
) {
    for item in items {
        if test_only(item_attrs(item)) {
            continue;
        }
        match item {
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                me.children.insert(name.clone());
                match &m.content {
                    Some((_, inner)) => {
                        let mut path = module.clone();
                        path.push(name.clone());
                        let mut child = Module {
                            file: me.file.clone(),
                            source: me.source.clone(),
                            ..Module::default()
                        };
                        let mut grand = Vec::new();
                        read_items(
                            inner,
                            &path,
                            &mut child,
                            &children_dir.join(&name),
                            &mut grand,
                        );
                        nested.push(Nested::Inline {
                            name,
                            module: child,
                            nested: grand,
                        });
                    }
                    None => nested.push(module_file(children_dir, &name, &m.attrs)),
                }
            }
            syn::Item::Use(u) => read_use(u, me),
            other => {
                if let Some(name) = item_name(other) {
                    me.items.insert(name);
                }
                let mut refs = Refs { module: me };
                refs.visit_item(other);
            }
        }
    }
}

/// Where the file of `mod name;` is: its `#[path]`, `name.rs` or
/// `name/mod.rs` in `dir`.
fn module_file(dir: &Path, name: &str, attrs: &[syn::Attribute]) -> Nested {
    let given = attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    });
    let (path, folder) = match given {
        Some(p) => {
            let path = dir.parent().unwrap_or(dir).join(p);
            let folder = path.file_name().is_some_and(|n| n == "mod.rs");
            (path, folder)
        }
        None if dir.join(format!("{name}.rs")).exists() => (dir.join(format!("{name}.rs")), false),
        None => (dir.join(name).join("mod.rs"), true),
    };
    let children_dir = if folder {
        path.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.join(name)
    };
    Nested::File {
        name: name.to_owned(),
        path,
        children_dir,
        folder,
    }
}

fn read_use(u: &syn::ItemUse, me: &mut Module) {
    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
    let mut found = Vec::new();
    flatten_use(&u.tree, Vec::new(), &mut found);
    for (bound, path) in found {
        if path.first().is_none_or(|s| s.is_empty()) {
            continue; // `::name`: another crate
        }
        if !reexport {
            me.refs.push(path.clone());
        }
        match bound {
            Bound::Name(name) => {
                me.bindings.insert(name, Binding { path });
            }
            Bound::Glob => me.globs.push(path),
            Bound::Nothing => {}
        }
    }
}

/// What a leaf of a use tree binds.
enum Bound {
    /// A name (`use a::B`, `use a::B as C`, `use a::{self}`).
    Name(String),
    /// Every public name of a module (`use a::*`).
    Glob,
    /// Nothing nameable (`use a::Trait as _`).
    Nothing,
}

/// Every leaf of a use tree: what it binds and the path it stands for.
fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Bound, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((Bound::Name(last.clone()), prefix));
                }
            } else {
                let mut path = prefix;
                path.push(name.clone());
                out.push((Bound::Name(name), path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            let name = r.ident.to_string();
            if name != "self" {
                path.push(name);
            }
            let alias = r.rename.to_string();
            let bound = if alias == "_" {
                Bound::Nothing
            } else {
                Bound::Name(alias)
            };
            out.push((bound, path));
        }
        syn::UseTree::Glob(_) => out.push((Bound::Glob, prefix)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), out);
            }
        }
    }
}

/// The paths named by code: in types, expressions and patterns (a single
/// name too: it may be bound by a `use`), and path-shaped tokens in macro
/// calls.
struct Refs<'m> {
    module: &'m mut Module,
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.module
                .refs
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        token_paths(mac.tokens.clone(), &mut self.module.refs);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        read_use(u, self.module);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        self.module.methods.insert(call.method.to_string());
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !test_only(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

/// Path-shaped tokens in a macro call's tokens (`a::b::C`, or a name).
fn token_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => {
                token_paths(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(first) => {
                let after_colons = i > 0 && is_colon(&tokens[i - 1]);
                let mut path = vec![first.to_string()];
                let mut j = i + 1;
                while j + 2 < tokens.len() && is_colon(&tokens[j]) && is_colon(&tokens[j + 1]) {
                    match tokens.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if !after_colons {
                    out.push(path);
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
}

fn is_colon(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == ':')
}

/// Whether the attributes say `#[cfg(test)]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(l) if l.path.is_ident("cfg") => l.tokens.to_string().trim() == "test",
        _ => false,
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The name an item defines, if it defines one.
fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The `May use:` paragraph of a file's inner documentation (`//!`).
fn may_use_line(attrs: &[syn::Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value().trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let start = lines.iter().position(|l| l.starts_with("May use:"))?;
    Some(
        lines[start..]
            .iter()
            .take_while(|l| !l.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" "),
    )
}
