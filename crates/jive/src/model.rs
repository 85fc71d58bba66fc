//! The class model that the load stages after parsing share: the subset's
//! types ([`Elem`], [`JType`]), parsed descriptors ([`Sig`]), the class's
//! fields and methods ([`FieldDef`], [`MethodDef`]), and the [`Model`]
//! that references are resolved against ([`Callee`]).
//!
//! It imports only the parsed class file (stage 1), and the later stages
//! import it: `subset` builds the model (and re-exports these
//! items, their public path), `verify` and `decode` read
//! it, and the run time (`heap`, `natives`) uses its
//! types.

use crate::classfile::{ClassFile, Cp};

/// Element type of a one-dimensional array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `byte[]` (`[B`).
    Byte,
    /// `boolean[]` (`[Z`, one byte per element, stores keep `v & 1`).
    Bool,
    /// `short[]` (`[S`).
    Short,
    /// `int[]` (`[I`).
    Int,
}

impl Elem {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Elem::Byte | Elem::Bool => 1,
            Elem::Short => 2,
            Elem::Int => 4,
        }
    }
    /// The array type as Java writes it (`byte[]`, ...).
    pub fn array_name(self) -> &'static str {
        match self {
            Elem::Byte => "byte[]",
            Elem::Bool => "boolean[]",
            Elem::Short => "short[]",
            Elem::Int => "int[]",
        }
    }
    /// Descriptor of the array type (`[B`, ...).
    pub fn descriptor(self) -> &'static str {
        match self {
            Elem::Byte => "[B",
            Elem::Bool => "[Z",
            Elem::Short => "[S",
            Elem::Int => "[I",
        }
    }
}

/// A type of the subset as written in descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JType {
    /// `int`.
    Int,
    /// `byte`.
    Byte,
    /// `short`.
    Short,
    /// `boolean`.
    Bool,
    /// A one-dimensional array.
    Array(Elem),
}

impl JType {
    /// True for arrays (references).
    pub fn is_array(self) -> bool {
        matches!(self, JType::Array(_))
    }
}

/// A parsed method descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sig {
    /// Parameter types.
    pub params: Vec<JType>,
    /// Return type (`None` for `void`).
    pub ret: Option<JType>,
}

fn parse_type(s: &[u8], i: &mut usize) -> Result<JType, String> {
    let c = *s.get(*i).ok_or("truncated descriptor")?;
    *i += 1;
    Ok(match c {
        b'I' => JType::Int,
        b'B' => JType::Byte,
        b'S' => JType::Short,
        b'Z' => JType::Bool,
        b'C' => return Err("type char is not supported".into()),
        b'J' => return Err("type long is not supported".into()),
        b'F' => return Err("type float is not supported".into()),
        b'D' => return Err("type double is not supported".into()),
        b'L' => {
            let end = s[*i..]
                .iter()
                .position(|&b| b == b';')
                .unwrap_or(s.len() - *i);
            let name = String::from_utf8_lossy(&s[*i..*i + end]);
            return Err(format!("object type {name} is not supported"));
        }
        b'[' => {
            let e = match s.get(*i) {
                Some(b'B') => Elem::Byte,
                Some(b'Z') => Elem::Bool,
                Some(b'S') => Elem::Short,
                Some(b'I') => Elem::Int,
                Some(b'[') => return Err("multi-dimensional arrays are not supported".into()),
                _ => {
                    return Err(format!(
                        "array type {} is not supported",
                        String::from_utf8_lossy(&s[*i - 1..])
                    ))
                }
            };
            *i += 1;
            JType::Array(e)
        }
        c => return Err(format!("bad descriptor character '{}'", c as char)),
    })
}

/// Parse a field descriptor of the subset.
pub fn parse_field_descriptor(d: &str) -> Result<JType, String> {
    let s = d.as_bytes();
    let mut i = 0;
    let t = parse_type(s, &mut i)?;
    if i != s.len() {
        return Err(format!("bad field descriptor {d}"));
    }
    Ok(t)
}

/// Parse a method descriptor of the subset.
pub fn parse_method_descriptor(d: &str) -> Result<Sig, String> {
    parse_sig(d, None)
}

/// The parameter type of a native that takes a *method name*: the argument
/// is a string literal (`ldc`) naming a static `(II)V` method of the class
/// being loaded, and the native receives the method's index
/// ([`MethodId::index`](crate::MethodId::index)).
pub const METHOD_NAME: &str = "Ljava/lang/String;";

/// Parse a native's descriptor: the subset's types, and method-name (`Ljava/lang/String;`)
/// parameters, which are passed as `int` (the method's index) and marked
/// true in the second vector (one entry per parameter).
pub fn parse_native_descriptor(d: &str) -> Result<(Sig, Vec<bool>), String> {
    let mut names = Vec::new();
    let sig = parse_sig(d, Some(&mut names))?;
    Ok((sig, names))
}

fn parse_sig(d: &str, mut names: Option<&mut Vec<bool>>) -> Result<Sig, String> {
    let s = d.as_bytes();
    if s.first() != Some(&b'(') {
        return Err(format!("bad method descriptor {d}"));
    }
    let mut i = 1;
    let mut params = Vec::new();
    while s.get(i) != Some(&b')') {
        if i >= s.len() || params.len() > 255 {
            return Err(format!("bad method descriptor {d}"));
        }
        if let Some(n) = names.as_deref_mut() {
            let name = s[i..].starts_with(METHOD_NAME.as_bytes());
            n.push(name);
            if name {
                i += METHOD_NAME.len();
                params.push(JType::Int);
                continue;
            }
        }
        params.push(parse_type(s, &mut i)?);
    }
    i += 1;
    let ret = if s.get(i) == Some(&b'V') {
        i += 1;
        None
    } else {
        Some(parse_type(s, &mut i)?)
    };
    if i != s.len() {
        return Err(format!("bad method descriptor {d}"));
    }
    Ok(Sig { params, ret })
}

/// A field of the class.
#[derive(Clone, Debug)]
pub struct FieldDef {
    /// Name.
    pub name: String,
    /// Descriptor.
    pub descriptor: String,
    /// Type.
    pub ty: JType,
    /// Declared static (statics and instance fields share one store: there
    /// is exactly one instance).
    pub is_static: bool,
    /// Declared volatile: compiled code loads it at every read, and
    /// loads every field read after it again (Java's acquire), even
    /// though a VM runs on one thread.
    pub is_volatile: bool,
}

/// A method of the class (signature only).
#[derive(Clone, Debug)]
pub struct MethodDef {
    /// Name.
    pub name: String,
    /// Descriptor.
    pub descriptor: String,
    /// Parsed descriptor.
    pub sig: Sig,
    /// Declared static.
    pub is_static: bool,
    /// Declared public (what another extension may link to, see
    /// [`Natives::register_export`](crate::Natives::register_export)).
    pub is_public: bool,
}

/// What a call instruction resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Callee {
    /// A method of this class (index into the class's methods).
    Own(u16),
    /// `java/lang/Object.<init>()V`, a no-op.
    ObjectInit,
    /// A native (index into the registry's entries).
    Native(usize),
}

/// The class-level model the verifier checks against.
pub struct Model<'a> {
    /// The parsed file.
    pub cf: &'a ClassFile,
    /// This class's name.
    pub name: String,
    /// Fields, in declaration order.
    pub fields: Vec<FieldDef>,
    /// Methods, in declaration order.
    pub methods: Vec<MethodDef>,
    /// Registered natives as (domain, class, name, descriptor, ephemeral,
    /// export: a method another class exports, see
    /// [`Natives::register_export`](crate::Natives::register_export)).
    pub natives: Vec<(String, String, String, String, bool, bool)>,
    /// Granted domains.
    pub granted: Vec<String>,
}

impl Model<'_> {
    /// Resolve the field reference at `cp` for `opcode` (getstatic etc.).
    pub fn resolve_field(&self, cp: u16, is_static: bool, op: &str) -> Result<u16, String> {
        let (c, n, d) = match self.cf.cp.get(cp as usize) {
            Some(Cp::FieldRef(c, nat)) => self.cf.member_ref(*c, *nat).map_err(|e| e.reason)?,
            _ => {
                return Err(format!(
                    "{op}: constant pool entry {cp} is not a field reference"
                ))
            }
        };
        if c != self.name {
            return Err(format!("{op} {c}.{n} is not a field of this class"));
        }
        let (i, f) = self
            .fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == n)
            .ok_or_else(|| format!("{op} {c}.{n}: no such field"))?;
        if f.descriptor != d {
            return Err(format!(
                "{op} {c}.{n}: descriptor {d} does not match the field's {}",
                f.descriptor
            ));
        }
        if f.is_static != is_static {
            return Err(format!(
                "{op} {c}.{n}: field is {}static",
                if f.is_static { "" } else { "not " }
            ));
        }
        Ok(i as u16)
    }

    /// Resolve the method reference at `cp` for `op` (invokestatic etc.),
    /// from method `from`.
    pub fn resolve_method(&self, cp: u16, op: &str, from: &MethodDef) -> Result<Callee, String> {
        let (c, n, d) = match self.cf.cp.get(cp as usize) {
            Some(Cp::MethodRef(c, nat)) => self.cf.member_ref(*c, *nat).map_err(|e| e.reason)?,
            Some(Cp::InterfaceMethodRef(..)) => {
                return Err(format!("{op} of an interface method is not supported"))
            }
            _ => {
                return Err(format!(
                    "{op}: constant pool entry {cp} is not a method reference"
                ))
            }
        };
        if c == self.name {
            if n == "<init>" || n == "<clinit>" {
                return Err(format!("{op} {c}.{n}{d}: constructors may not be called"));
            }
            let (i, m) = self
                .methods
                .iter()
                .enumerate()
                .find(|(_, m)| m.name == n)
                .ok_or_else(|| format!("{op} {c}.{n}{d}: no such method"))?;
            if m.descriptor != d {
                return Err(format!(
                    "{op} {c}.{n}{d}: descriptor does not match the method's {}",
                    m.descriptor
                ));
            }
            let want_static = op == "invokestatic";
            if m.is_static != want_static {
                return Err(format!(
                    "{op} {c}.{n}{d}: method is {}static",
                    if m.is_static { "" } else { "not " }
                ));
            }
            return Ok(Callee::Own(i as u16));
        }
        if c == "java/lang/Object" && n == "<init>" && d == "()V" {
            if op != "invokespecial" || from.name != "<init>" {
                return Err(format!(
                    "{op} java/lang/Object.<init>()V is only allowed as the super call of <init>"
                ));
            }
            return Ok(Callee::ObjectInit);
        }
        if let Some(e) = self.natives.iter().find(|e| e.5 && e.1 == c) {
            self.resolve_export(op, c, n, d, &e.0)?;
        }
        if let Some((i, e)) = self
            .natives
            .iter()
            .enumerate()
            .find(|(_, e)| e.1 == c && e.2 == n && e.3 == d)
        {
            if op != "invokestatic" {
                return Err(format!("{op} of native {c}.{n}{d}: natives are static"));
            }
            if !self.granted.contains(&e.0) {
                return Err(format!(
                    "native {c}.{n}{d} is in domain \"{}\", which is not granted to this class",
                    e.0
                ));
            }
            return Ok(Callee::Native(i));
        }
        if self.natives.iter().any(|e| e.1 == c) {
            return Err(format!(
                "{op} {c}.{n}{d}: no such native method is registered"
            ));
        }
        Err(format!(
            "{op} {c}.{n}{d} is not a method of this class or a granted native"
        ))
    }

    /// Check a call of `c.n d`, a class that domain `dom` exports: the
    /// domain granted, the name exported, with this descriptor (each
    /// refusal names what is missing).
    fn resolve_export(&self, op: &str, c: &str, n: &str, d: &str, dom: &str) -> Result<(), String> {
        if !self.granted.iter().any(|g| g == dom) {
            return Err(format!(
                "{op} {c}.{n}{d}: class {c} is exported by domain \"{dom}\", which is not \
                 granted to this class"
            ));
        }
        let same = |e: &&(String, String, String, String, bool, bool)| e.5 && e.1 == c;
        let Some(e) = self.natives.iter().filter(same).find(|e| e.2 == n) else {
            return Err(format!(
                "{op} {c}.{n}{d}: domain \"{dom}\" exports no method {n}"
            ));
        };
        if e.3 != d {
            return Err(format!(
                "{op} {c}.{n}{d}: domain \"{dom}\" exports {n}{}, not {n}{d}",
                e.3
            ));
        }
        Ok(())
    }
}
