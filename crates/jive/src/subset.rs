//! Stage 2: the subset check, member resolution, and [`Class`] (the result
//! of all load stages).
//!
//! The JIVE subset (U-Net/SLE §3.1): one class whose superclass is
//! `java/lang/Object`, implementing no interfaces; fields and method
//! parameters of type `byte`, `short`, `int`, `boolean` or one-dimensional
//! arrays of those; no two methods with one name (no overloading); no native,
//! abstract or synchronized methods of its own. References in the constant
//! pool are resolved here, once: a field reference must name a field of this
//! class with the same descriptor; a call must name a method of this class,
//! the `Object` constructor (from `<init>` only), or a native method
//! registered in a domain granted to the class.

use std::sync::Arc;

use crate::classfile::{
    ClassFile, Cp, ACC_ABSTRACT, ACC_INTERFACE, ACC_NATIVE, ACC_STATIC, ACC_SYNCHRONIZED,
};
use crate::decode::{self, MethodCode};
use crate::natives::{NativeFn, Natives};
use crate::{verify, Rejection};

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
    /// Registered natives as (domain, class, name, descriptor).
    pub natives: Vec<(String, String, String, String)>,
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
}

/// Identifies a method of a loaded [`Class`] (index in declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MethodId(pub(crate) u16);

/// Identifies a field of a loaded [`Class`] (index in declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldId(pub(crate) u16);

/// A native bound into a class: the function and its signature.
pub(crate) struct BoundNative<H> {
    pub f: NativeFn<H>,
    /// Read by the compiler only.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub fast: Option<crate::natives::Fast<H>>,
    pub sig: Sig,
    pub name: String,
}

pub(crate) struct ClassInner<H> {
    pub name: String,
    pub fields: Vec<FieldDef>,
    pub field_init: Vec<i32>,
    pub methods: Vec<MethodDef>,
    pub code: Vec<MethodCode>,
    pub natives: Vec<BoundNative<H>>,
    pub clinit: Option<u16>,
    pub init: Option<u16>,
}

/// A loaded, subset-checked, verified and pre-decoded class. Cheap to clone
/// (shared behind an `Arc`).
pub struct Class<H> {
    pub(crate) inner: Arc<ClassInner<H>>,
}

impl<H> Clone for Class<H> {
    fn clone(&self) -> Self {
        Class {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<H> Class<H> {
    /// Compile the class's methods to machine code for
    /// [`Vm::install`](crate::Vm::install) (feature `jit`; see
    /// [`Vm::compile`](crate::Vm::compile) for what is compiled). Takes
    /// some milliseconds: a host that must not stall calls it on another
    /// thread.
    #[cfg(feature = "jit")]
    pub fn compile(&self) -> Result<crate::jit::Compiled<H>, String> {
        crate::jit::compile(&self.inner)
    }
}

impl<H> std::fmt::Debug for Class<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Class")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl<H> Class<H> {
    /// Load a class file: parse, check the subset, resolve references
    /// (natives only from the `granted` domains), verify and pre-decode every
    /// method.
    pub fn load(
        bytes: &[u8],
        natives: &Natives<H>,
        granted: &[&str],
    ) -> Result<Class<H>, Rejection> {
        let cf = ClassFile::parse(bytes)?;
        let name = cf.class_name_at(cf.this_class, "this_class")?.to_string();
        if cf.access & ACC_INTERFACE != 0 {
            return Err(Rejection::class("interfaces are not supported"));
        }
        let sup = if cf.super_class == 0 {
            ""
        } else {
            cf.class_name_at(cf.super_class, "super_class")?
        };
        if sup != "java/lang/Object" {
            return Err(Rejection::class(format!(
                "superclass {sup} is not java/lang/Object"
            )));
        }
        if cf.interfaces != 0 {
            return Err(Rejection::class(format!(
                "the class implements {} interface(s); interfaces are not supported",
                cf.interfaces
            )));
        }
        let mut fields: Vec<FieldDef> = Vec::new();
        let mut field_init = Vec::new();
        for f in &cf.fields {
            if fields.iter().any(|g| g.name == f.name) {
                return Err(Rejection::class(format!("duplicate field name {}", f.name)));
            }
            let ty = parse_field_descriptor(&f.descriptor)
                .map_err(|e| Rejection::class(format!("field {} {}: {e}", f.name, f.descriptor)))?;
            let is_static = f.access & ACC_STATIC != 0;
            let mut init = 0;
            if let (true, Some(cv)) = (is_static, f.constant_value) {
                // Narrowed as a store into the field would be (JVMS
                // §4.7.2 allows any int constant for byte, short and
                // boolean fields; `putstatic` keeps the low bits, sign
                // extended, and a boolean its low bit, as `bastore` does).
                match (cf.cp.get(cv as usize), ty) {
                    (Some(Cp::Integer(v)), JType::Int) => init = *v,
                    (Some(Cp::Integer(v)), JType::Byte) => init = *v as i8 as i32,
                    (Some(Cp::Integer(v)), JType::Short) => init = *v as i16 as i32,
                    (Some(Cp::Integer(v)), JType::Bool) => init = *v & 1,
                    _ => {
                        return Err(Rejection::class(format!(
                            "field {}: ConstantValue is not an int constant",
                            f.name
                        )))
                    }
                }
            }
            field_init.push(init);
            fields.push(FieldDef {
                name: f.name.clone(),
                descriptor: f.descriptor.clone(),
                ty,
                is_static,
            });
        }
        if fields.len() > u16::MAX as usize {
            return Err(Rejection::class("too many fields"));
        }
        let mut methods: Vec<MethodDef> = Vec::new();
        for m in &cf.methods {
            let mname = format!("{}{}", m.name, m.descriptor);
            let rej = |reason: String| Rejection {
                method: Some(mname.clone()),
                offset: None,
                reason,
            };
            if methods.iter().any(|g| g.name == m.name) {
                return Err(rej(format!(
                    "a second method named {}: overloading is not supported",
                    m.name
                )));
            }
            if m.access & ACC_NATIVE != 0 {
                return Err(rej("native methods of the applet are not supported".into()));
            }
            if m.access & ACC_ABSTRACT != 0 {
                return Err(rej("abstract methods are not supported".into()));
            }
            if m.access & ACC_SYNCHRONIZED != 0 {
                return Err(rej("synchronized methods are not supported".into()));
            }
            let sig = parse_method_descriptor(&m.descriptor).map_err(rej)?;
            let is_static = m.access & ACC_STATIC != 0;
            if m.name == "<init>" && (m.descriptor != "()V" || is_static) {
                return Err(rej("the constructor must be <init>()V".into()));
            }
            if m.name == "<clinit>" && (m.descriptor != "()V" || !is_static) {
                return Err(rej("<clinit> must be static ()V".into()));
            }
            methods.push(MethodDef {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                sig,
                is_static,
            });
        }
        if methods.len() > u16::MAX as usize {
            return Err(Rejection::class("too many methods"));
        }
        let model = Model {
            cf: &cf,
            name: name.clone(),
            fields,
            methods,
            natives: natives
                .entries
                .iter()
                .map(|e| {
                    (
                        e.domain.clone(),
                        e.class.clone(),
                        e.name.clone(),
                        e.descriptor.clone(),
                    )
                })
                .collect(),
            granted: granted.iter().map(|s| s.to_string()).collect(),
        };
        // Natives used by the class, in first-use order.
        let mut used_natives: Vec<usize> = Vec::new();
        let mut code = Vec::with_capacity(model.methods.len());
        // Verification work left for the class (see `MAX_CLASS_WORK`).
        let mut work = verify::MAX_CLASS_WORK;
        for (i, m) in cf.methods.iter().enumerate() {
            let def = &model.methods[i];
            let mname = format!("{}{}", def.name, def.descriptor);
            let c = m.code.as_ref().ok_or_else(|| Rejection {
                method: Some(mname.clone()),
                offset: None,
                reason: "no Code attribute".into(),
            })?;
            let v =
                verify::verify_within(&model, def, c, &mut work).map_err(|(offset, reason)| {
                    Rejection {
                        method: Some(mname.clone()),
                        offset,
                        reason,
                    }
                })?;
            let mc = decode::decode(&model, def, c, &v, &mut used_natives).map_err(|reason| {
                Rejection {
                    method: Some(mname.clone()),
                    offset: None,
                    reason,
                }
            })?;
            code.push(mc);
        }
        let mut bound = Vec::new();
        for &ni in &used_natives {
            let e = &natives.entries[ni];
            let sig = parse_method_descriptor(&e.descriptor).map_err(|r| {
                Rejection::class(format!(
                    "native {}.{}{}: {r}",
                    e.class, e.name, e.descriptor
                ))
            })?;
            bound.push(BoundNative {
                f: e.f,
                fast: e.fast,
                sig,
                name: format!("{}.{}{}", e.class, e.name, e.descriptor),
            });
        }
        let find = |n: &str| {
            model
                .methods
                .iter()
                .position(|m| m.name == n)
                .map(|i| i as u16)
        };
        let clinit = find("<clinit>");
        let init = find("<init>");
        let Model {
            fields, methods, ..
        } = model;
        Ok(Class {
            inner: Arc::new(ClassInner {
                name,
                fields,
                field_init,
                methods,
                code,
                natives: bound,
                clinit,
                init,
            }),
        })
    }

    /// The class's name (internal form, e.g. `pkg/Echo`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The method called `name` (methods are not overloaded). `<init>` and
    /// `<clinit>` are not returned: the VM runs them itself.
    pub fn method(&self, name: &str) -> Option<MethodId> {
        if name == "<init>" || name == "<clinit>" {
            return None;
        }
        self.inner
            .methods
            .iter()
            .position(|m| m.name == name)
            .map(|i| MethodId(i as u16))
    }

    /// Every method the host may invoke (all but `<init>` and `<clinit>`),
    /// in declaration order.
    pub fn methods(&self) -> impl Iterator<Item = MethodId> + '_ {
        self.inner
            .methods
            .iter()
            .enumerate()
            .filter(|(_, m)| m.name != "<init>" && m.name != "<clinit>")
            .map(|(i, _)| MethodId(i as u16))
    }

    /// The name of method `m`.
    pub fn method_name(&self, m: MethodId) -> &str {
        &self.inner.methods[m.0 as usize].name
    }

    /// The descriptor of method `m`, e.g. `(I)I`.
    pub fn method_descriptor(&self, m: MethodId) -> &str {
        &self.inner.methods[m.0 as usize].descriptor
    }

    /// Whether method `m` is static.
    pub fn method_is_static(&self, m: MethodId) -> bool {
        self.inner.methods[m.0 as usize].is_static
    }

    /// The field called `name` (static or instance), if any.
    pub fn field(&self, name: &str) -> Option<FieldId> {
        self.inner
            .fields
            .iter()
            .position(|f| f.name == name)
            .map(|i| FieldId(i as u16))
    }

    /// The decoded form of method `m` (for inspection, tests and a JIT).
    pub fn decoded(&self, m: MethodId) -> &MethodCode {
        &self.inner.code[m.0 as usize]
    }
}
