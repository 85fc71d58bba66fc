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
//! registered in a domain granted to the class (which may be a method
//! another class exports, [`Natives::register_export`]: a call of it that
//! does not link names what is missing, the domain, the method or its
//! descriptor).
//!
//! The types this stage checks against and resolves with ([`Elem`],
//! [`JType`], [`Sig`], [`Model`], ...) are defined in a module of their own
//! below all stages (the verifier, the decoder and the run time use them
//! too) and re-exported here.

use std::sync::Arc;

use crate::classfile::{
    ClassFile, Cp, ACC_ABSTRACT, ACC_INTERFACE, ACC_NATIVE, ACC_PUBLIC, ACC_STATIC,
    ACC_SYNCHRONIZED, ACC_VOLATILE,
};
use crate::decode::{self, MethodCode, SlotMasks};
use crate::ephemeral::{self, Reach, Site};
use crate::fault::Rejection;
use crate::lend::Uses;
pub use crate::model::{
    parse_field_descriptor, parse_method_descriptor, parse_native_descriptor, Callee, Elem,
    FieldDef, JType, MethodDef, Model, Sig,
};
use crate::natives::{BoundNative, Natives};
use crate::verify;

/// Identifies a method of a loaded [`Class`] (index in declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MethodId(pub(crate) u16);

impl MethodId {
    /// The method's index in declaration order (what a native taking a
    /// method name receives; back with [`Class::method_at`]).
    pub fn index(self) -> u32 {
        self.0 as u32
    }
}

/// Rules a host adds to the load stages ([`Class::load_with`]). The default
/// adds none ([`Class::load`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadRules {
    /// SPINE's `EPHEMERAL`: every method named by a method-name literal
    /// (see [`Natives::register_ephemeral`]) is a *handler*; a handler and
    /// everything it can call through the class's own methods may not
    /// allocate (`newarray`) and may call only ephemeral natives. A class
    /// that breaks the rule is rejected with the handler, the callee (or
    /// the allocating instruction), the bytecode offset and the method it
    /// is in, e.g. `handler onPing: calls unet/spine/Spine.addHandler (not
    /// ephemeral) at offset 12 of helper`.
    pub handlers_ephemeral: bool,
}

/// Identifies a field of a loaded [`Class`] (index in declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldId(pub(crate) u16);

pub(crate) struct ClassInner<H> {
    pub name: String,
    pub fields: Vec<FieldDef>,
    pub field_init: Vec<i32>,
    pub methods: Vec<MethodDef>,
    pub code: Vec<MethodCode>,
    pub natives: Vec<BoundNative<H>>,
    pub clinit: Option<u16>,
    pub init: Option<u16>,
    /// Methods named by method-name literals, ascending.
    pub handlers: Vec<u16>,
    /// What the `EPHEMERAL` rule reads (for [`Class::ephemeral_check`]).
    pub reach: Reach,
    /// Per method: the collector's roots in its frame
    /// ([`ClassInner::masks`]).
    pub roots: Vec<Option<SlotMasks>>,
    /// How the code uses each field (which may be lent, [`crate::lend`]).
    pub uses: Uses,
}

impl<H> ClassInner<H> {
    /// The collector's roots in a frame of method `m` (see
    /// `decode::roots`); `None` for a method that cannot allocate or is
    /// past the analysis's bounds, whose whole frame is scanned.
    pub(crate) fn masks(&self, m: usize) -> Option<&SlotMasks> {
        self.roots.get(m)?.as_ref()
    }
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
        Self::load_with(bytes, natives, granted, &LoadRules::default())
    }

    /// [`Class::load`] with the checks of `rules` added.
    pub fn load_with(
        bytes: &[u8],
        natives: &Natives<H>,
        granted: &[&str],
        rules: &LoadRules,
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
                is_volatile: f.access & ACC_VOLATILE != 0,
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
                is_public: m.access & ACC_PUBLIC != 0,
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
                        e.ephemeral,
                        e.export,
                    )
                })
                .collect(),
            granted: granted.iter().map(|s| s.to_string()).collect(),
        };
        // Natives used by the class, in first-use order.
        let mut used_natives: Vec<usize> = Vec::new();
        let mut code = Vec::with_capacity(model.methods.len());
        // Calls and allocations of each method, and the handlers named.
        let mut sites: Vec<Vec<(u32, Site)>> = Vec::with_capacity(model.methods.len());
        let mut handlers: Vec<u16> = Vec::new();
        // Verification work left for the class (see `MAX_CLASS_WORK`).
        let mut work = verify::MAX_CLASS_WORK;
        let mut uses = Uses::new(model.fields.len());
        for (i, m) in cf.methods.iter().enumerate() {
            let def = &model.methods[i];
            let mname = format!("{}{}", def.name, def.descriptor);
            let c = m.code.as_ref().ok_or_else(|| Rejection {
                method: Some(mname.clone()),
                offset: None,
                reason: "no Code attribute".into(),
            })?;
            let v = verify::verify_within(&model, def, c, &mut work).map_err(|e| Rejection {
                method: Some(mname.clone()),
                offset: e.offset,
                reason: e.kind.to_string(),
            })?;
            let mc = decode::decode(&model, def, c, &v, &mut used_natives).map_err(|reason| {
                Rejection {
                    method: Some(mname.clone()),
                    offset: None,
                    reason,
                }
            })?;
            code.push(mc);
            uses.scan(&model, i as u16, &v);
            let (s, names) = ephemeral::sites(&v);
            sites.push(s);
            handlers.extend(names);
        }
        handlers.sort_unstable();
        handlers.dedup();
        let reach = Reach::new(&model, sites);
        let types: Vec<JType> = model.fields.iter().map(|f| f.ty).collect();
        uses.finish(&types, &reach);
        if rules.handlers_ephemeral {
            ephemeral::check(&reach, &handlers, "handler").map_err(Rejection::class)?;
        }
        let mut bound = Vec::new();
        for &ni in &used_natives {
            let e = &natives.entries[ni];
            let sig = parse_native_descriptor(&e.descriptor)
                .map(|s| s.0)
                .map_err(|r| {
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
        // The collector's roots in the frames of the methods that may
        // allocate (see `decode::roots`).
        let roots = decode::class_masks(&code, |n| {
            bound
                .get(n as usize)
                .is_some_and(|b: &BoundNative<H>| b.sig.ret.is_some())
        });
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
                handlers,
                reach,
                roots,
                uses,
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

    /// Whether the host may lend field `f` bytes while it runs method `m`
    /// ([`Vm::lend_bytes`](crate::Vm::lend_bytes)): `f` is a `byte[]`
    /// field that the class's code never uses, or reads only in `m`, only
    /// to pass it straight to natives as their `byte[]` argument, and
    /// never writes; and no method of the class calls `m`.
    pub fn lendable(&self, f: FieldId, m: MethodId) -> bool {
        self.inner.uses.lendable(f.0, m.0)
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

    /// The method of index `i` ([`MethodId::index`]), if the class has one
    /// the host may invoke (not `<init>` or `<clinit>`).
    pub fn method_at(&self, i: u32) -> Option<MethodId> {
        let m = self.inner.methods.get(i as usize)?;
        if m.name == "<init>" || m.name == "<clinit>" {
            return None;
        }
        Some(MethodId(i as u16))
    }

    /// The class's *handlers*: the methods named by method-name literals
    /// (arguments of natives taking a `Ljava/lang/String;`), in
    /// declaration order. Each is a static `(II)V` method.
    pub fn handlers(&self) -> Vec<MethodId> {
        self.inner.handlers.iter().map(|&i| MethodId(i)).collect()
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

    /// Whether method `m` is declared public.
    pub fn method_is_public(&self, m: MethodId) -> bool {
        self.inner.methods[m.0 as usize].is_public
    }

    /// SPINE's `EPHEMERAL` rule ([`LoadRules::handlers_ephemeral`]) for
    /// method `m`: whether it and everything it can call through the
    /// class's own methods is free of allocation and calls only ephemeral
    /// natives. The first violation names `m` as an export, the callee (or
    /// `newarray`), the bytecode offset and the method it is in, e.g.
    /// `export build: allocates (newarray) at offset 3 of build`. A host
    /// that lets other classes call `m` from their handlers asks this.
    pub fn ephemeral_check(&self, m: MethodId) -> Result<(), String> {
        ephemeral::check(&self.inner.reach, &[m.0], "export")
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
