//! Stage 1: the class-file parser.
//!
//! A pure, bounds-checked reader of the JVM class-file format (JVMS §4).
//! It never panics and never allocates more than the input justifies: every
//! count is consumed entry by entry from the remaining bytes, strings are
//! bounded by their length prefix which is checked first, and the whole file
//! is capped at [`MAX_CLASS_BYTES`]. It checks the format only (magic,
//! version, constant-pool tags and indices used structurally, attribute
//! lengths); meaning is checked by `subset` and `verify`.

use crate::fault::Rejection;
use crate::limits::{MAX_CLASS_BYTES, MAX_CODE_BYTES};

/// Oldest accepted major version (JDK 1.1).
pub const MIN_MAJOR: u16 = 45;
/// Newest accepted major version (JDK 25).
pub const MAX_MAJOR: u16 = 69;

/// One constant-pool entry (JVMS §4.4). Entries the subset never uses keep
/// only their tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cp {
    /// Index 0, and the slot after a Long or Double.
    Unusable,
    /// `CONSTANT_Utf8` (decoded lossily from modified UTF-8).
    Utf8(String),
    /// `CONSTANT_Integer`.
    Integer(i32),
    /// `CONSTANT_Float`.
    Float,
    /// `CONSTANT_Long`.
    Long,
    /// `CONSTANT_Double`.
    Double,
    /// `CONSTANT_Class`: index of the name.
    Class(u16),
    /// `CONSTANT_String`: index of the text (a `Utf8` entry).
    String(u16),
    /// `CONSTANT_Fieldref`: class index, name-and-type index.
    FieldRef(u16, u16),
    /// `CONSTANT_Methodref`: class index, name-and-type index.
    MethodRef(u16, u16),
    /// `CONSTANT_InterfaceMethodref`.
    InterfaceMethodRef(u16, u16),
    /// `CONSTANT_NameAndType`: name index, descriptor index.
    NameAndType(u16, u16),
    /// `CONSTANT_MethodHandle`, `MethodType`, `Dynamic`, `InvokeDynamic`,
    /// `Module` or `Package` (tag kept for messages).
    Other(u8),
}

/// A field as declared.
#[derive(Clone, Debug)]
pub struct FieldInfo {
    /// Access flags.
    pub access: u16,
    /// Field name.
    pub name: String,
    /// Field descriptor.
    pub descriptor: String,
    /// `ConstantValue` attribute (constant-pool index), if any.
    pub constant_value: Option<u16>,
}

/// A method's `Code` attribute.
#[derive(Clone, Debug)]
pub struct CodeInfo {
    /// Declared operand-stack depth.
    pub max_stack: u16,
    /// Declared local-variable slots.
    pub max_locals: u16,
    /// The bytecode.
    pub code: Vec<u8>,
    /// Number of exception-table entries (the subset requires 0).
    pub exception_table_len: u16,
}

/// A method as declared.
#[derive(Clone, Debug)]
pub struct MethodInfo {
    /// Access flags.
    pub access: u16,
    /// Method name.
    pub name: String,
    /// Method descriptor.
    pub descriptor: String,
    /// The `Code` attribute, if present.
    pub code: Option<CodeInfo>,
}

/// A parsed class file.
#[derive(Clone, Debug)]
pub struct ClassFile {
    /// Minor version.
    pub minor: u16,
    /// Major version.
    pub major: u16,
    /// Constant pool, index 0 unusable.
    pub cp: Vec<Cp>,
    /// Class access flags.
    pub access: u16,
    /// `this_class` index.
    pub this_class: u16,
    /// `super_class` index (0 only for `java/lang/Object`).
    pub super_class: u16,
    /// Number of interfaces implemented.
    pub interfaces: u16,
    /// Fields.
    pub fields: Vec<FieldInfo>,
    /// Methods.
    pub methods: Vec<MethodInfo>,
}

/// Access flag `ACC_PUBLIC`.
pub const ACC_PUBLIC: u16 = 0x0001;
/// Access flag `ACC_STATIC`.
pub const ACC_STATIC: u16 = 0x0008;
/// Access flag `ACC_VOLATILE`.
pub const ACC_VOLATILE: u16 = 0x0040;
/// Access flag `ACC_SYNCHRONIZED`.
pub const ACC_SYNCHRONIZED: u16 = 0x0020;
/// Access flag `ACC_NATIVE`.
pub const ACC_NATIVE: u16 = 0x0100;
/// Access flag `ACC_INTERFACE`.
pub const ACC_INTERFACE: u16 = 0x0200;
/// Access flag `ACC_ABSTRACT`.
pub const ACC_ABSTRACT: u16 = 0x0400;

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

fn truncated(what: &str) -> Rejection {
    Rejection::class(format!("truncated class file (in {what})"))
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Rejection> {
        let end = self.pos.checked_add(n).ok_or_else(|| truncated(what))?;
        let s = self.b.get(self.pos..end).ok_or_else(|| truncated(what))?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, Rejection> {
        Ok(self.bytes(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, Rejection> {
        let s = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32, Rejection> {
        let s = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
}

impl ClassFile {
    /// Parse a class file. Checks the format only.
    pub fn parse(bytes: &[u8]) -> Result<ClassFile, Rejection> {
        if bytes.len() > MAX_CLASS_BYTES {
            return Err(Rejection::class(format!(
                "class file of {} bytes exceeds the {} byte limit",
                bytes.len(),
                MAX_CLASS_BYTES
            )));
        }
        let mut r = Reader { b: bytes, pos: 0 };
        let magic = r.u32("header")?;
        if magic != 0xCAFE_BABE {
            return Err(Rejection::class(format!(
                "bad magic 0x{magic:08X} (not a class file)"
            )));
        }
        let minor = r.u16("header")?;
        let major = r.u16("header")?;
        if !(MIN_MAJOR..=MAX_MAJOR).contains(&major) {
            return Err(Rejection::class(format!(
                "unsupported class file version {major}.{minor} (supported: {MIN_MAJOR} to {MAX_MAJOR})"
            )));
        }
        let cp_count = r.u16("constant pool count")? as usize;
        if cp_count == 0 {
            return Err(Rejection::class("constant pool count is 0"));
        }
        // Each entry takes at least 3 bytes: check before reserving.
        if (cp_count - 1) * 3 > r.remaining() {
            return Err(Rejection::class(format!(
                "constant pool count {cp_count} exceeds the file size"
            )));
        }
        let mut cp = Vec::with_capacity(cp_count);
        cp.push(Cp::Unusable);
        while cp.len() < cp_count {
            let tag = r.u8("constant pool")?;
            let e = match tag {
                1 => {
                    let len = r.u16("constant pool")? as usize;
                    let s = r.bytes(len, "constant pool utf8")?;
                    Cp::Utf8(decode_mutf8(s))
                }
                3 => Cp::Integer(r.u32("constant pool")? as i32),
                4 => {
                    r.u32("constant pool")?;
                    Cp::Float
                }
                5 | 6 => {
                    r.bytes(8, "constant pool")?;
                    if cp.len() + 1 >= cp_count {
                        return Err(Rejection::class(
                            "long or double constant in the last constant pool slot",
                        ));
                    }
                    cp.push(if tag == 5 { Cp::Long } else { Cp::Double });
                    Cp::Unusable
                }
                7 => Cp::Class(r.u16("constant pool")?),
                8 => Cp::String(r.u16("constant pool")?),
                9..=12 => {
                    let a = r.u16("constant pool")?;
                    let b = r.u16("constant pool")?;
                    match tag {
                        9 => Cp::FieldRef(a, b),
                        10 => Cp::MethodRef(a, b),
                        11 => Cp::InterfaceMethodRef(a, b),
                        _ => Cp::NameAndType(a, b),
                    }
                }
                15 => {
                    r.bytes(3, "constant pool")?;
                    Cp::Other(tag)
                }
                16 | 19 | 20 => {
                    r.u16("constant pool")?;
                    Cp::Other(tag)
                }
                17 | 18 => {
                    r.u32("constant pool")?;
                    Cp::Other(tag)
                }
                _ => {
                    return Err(Rejection::class(format!(
                        "invalid constant pool tag {tag} at entry {}",
                        cp.len()
                    )))
                }
            };
            cp.push(e);
        }
        let access = r.u16("class header")?;
        let this_class = r.u16("class header")?;
        let super_class = r.u16("class header")?;
        let interfaces = r.u16("interfaces")?;
        r.bytes(interfaces as usize * 2, "interfaces")?;
        let mut cf = ClassFile {
            minor,
            major,
            cp,
            access,
            this_class,
            super_class,
            interfaces,
            fields: Vec::new(),
            methods: Vec::new(),
        };
        let nfields = r.u16("fields")? as usize;
        // Each field takes at least 8 bytes.
        if nfields * 8 > r.remaining() {
            return Err(Rejection::class(format!(
                "field count {nfields} exceeds the file size"
            )));
        }
        for _ in 0..nfields {
            let access = r.u16("field")?;
            let name = cf.utf8_at(r.u16("field")?, "field name")?.to_string();
            let descriptor = cf.utf8_at(r.u16("field")?, "field descriptor")?.to_string();
            let mut constant_value = None;
            let nattr = r.u16("field attributes")?;
            for _ in 0..nattr {
                let an = r.u16("attribute")?;
                let len = r.u32("attribute")? as usize;
                let body = r.bytes(len, "attribute")?;
                if cf.utf8_at(an, "attribute name")? == "ConstantValue" {
                    if len != 2 || constant_value.is_some() {
                        return Err(Rejection::class(format!(
                            "field {name}: malformed ConstantValue attribute"
                        )));
                    }
                    constant_value = Some(u16::from_be_bytes([body[0], body[1]]));
                }
            }
            cf.fields.push(FieldInfo {
                access,
                name,
                descriptor,
                constant_value,
            });
        }
        let nmethods = r.u16("methods")? as usize;
        if nmethods * 8 > r.remaining() {
            return Err(Rejection::class(format!(
                "method count {nmethods} exceeds the file size"
            )));
        }
        for _ in 0..nmethods {
            let access = r.u16("method")?;
            let name = cf.utf8_at(r.u16("method")?, "method name")?.to_string();
            let descriptor = cf
                .utf8_at(r.u16("method")?, "method descriptor")?
                .to_string();
            let mut code = None;
            let nattr = r.u16("method attributes")?;
            for _ in 0..nattr {
                let an = r.u16("attribute")?;
                let len = r.u32("attribute")? as usize;
                let body = r.bytes(len, "attribute")?;
                if cf.utf8_at(an, "attribute name")? == "Code" {
                    if code.is_some() {
                        return Err(Rejection {
                            method: Some(format!("{name}{descriptor}")),
                            offset: None,
                            reason: "more than one Code attribute".into(),
                        });
                    }
                    code = Some(parse_code(body).map_err(|mut e| {
                        e.method = Some(format!("{name}{descriptor}"));
                        e
                    })?);
                }
            }
            cf.methods.push(MethodInfo {
                access,
                name,
                descriptor,
                code,
            });
        }
        let nattr = r.u16("class attributes")?;
        for _ in 0..nattr {
            let an = r.u16("attribute")?;
            cf.utf8_at(an, "attribute name")?;
            let len = r.u32("attribute")? as usize;
            r.bytes(len, "attribute")?;
        }
        if r.remaining() != 0 {
            return Err(Rejection::class(format!(
                "{} trailing bytes after the class file",
                r.remaining()
            )));
        }
        Ok(cf)
    }

    /// The UTF-8 constant at `i`, or a rejection naming `what`.
    pub fn utf8_at(&self, i: u16, what: &str) -> Result<&str, Rejection> {
        match self.cp.get(i as usize) {
            Some(Cp::Utf8(s)) => Ok(s),
            _ => Err(Rejection::class(format!(
                "bad constant pool index {i} for {what} (not a Utf8 entry)"
            ))),
        }
    }

    /// The class name of the `CONSTANT_Class` at `i`.
    pub fn class_name_at(&self, i: u16, what: &str) -> Result<&str, Rejection> {
        match self.cp.get(i as usize) {
            Some(Cp::Class(n)) => self.utf8_at(*n, what),
            _ => Err(Rejection::class(format!(
                "bad constant pool index {i} for {what} (not a Class entry)"
            ))),
        }
    }

    /// Class name, member name and descriptor of a field or method ref's
    /// parts (`class` index, `nat` name-and-type index).
    pub fn member_ref(&self, class: u16, nat: u16) -> Result<(&str, &str, &str), Rejection> {
        let c = self.class_name_at(class, "member reference class")?;
        match self.cp.get(nat as usize) {
            Some(Cp::NameAndType(n, d)) => Ok((
                c,
                self.utf8_at(*n, "member name")?,
                self.utf8_at(*d, "member descriptor")?,
            )),
            _ => Err(Rejection::class(format!(
                "bad constant pool index {nat} (not a NameAndType entry)"
            ))),
        }
    }
}

fn parse_code(body: &[u8]) -> Result<CodeInfo, Rejection> {
    let mut r = Reader { b: body, pos: 0 };
    let max_stack = r.u16("Code attribute")?;
    let max_locals = r.u16("Code attribute")?;
    let len = r.u32("Code attribute")? as usize;
    if len == 0 {
        return Err(Rejection::class("empty Code array"));
    }
    if len > MAX_CODE_BYTES {
        return Err(Rejection::class(format!(
            "code length {len} exceeds the {MAX_CODE_BYTES} byte limit"
        )));
    }
    let code = r.bytes(len, "Code array")?.to_vec();
    let exception_table_len = r.u16("exception table")?;
    r.bytes(exception_table_len as usize * 8, "exception table")?;
    let nattr = r.u16("Code attributes")?;
    for _ in 0..nattr {
        r.u16("Code attribute")?;
        let len = r.u32("Code attribute")? as usize;
        r.bytes(len, "Code attribute")?;
    }
    if r.remaining() != 0 {
        return Err(Rejection::class(
            "Code attribute length does not match its contents",
        ));
    }
    Ok(CodeInfo {
        max_stack,
        max_locals,
        code,
        exception_table_len,
    })
}

/// Decode modified UTF-8 (JVMS §4.4.7) leniently: `C0 80` is NUL, anything
/// malformed becomes U+FFFD. Names are only compared, so lossy is safe: a
/// collision can only make a class look overloaded and be rejected.
fn decode_mutf8(s: &[u8]) -> String {
    if s.is_ascii() {
        // Every byte < 0x80 is a valid one-byte character.
        return String::from_utf8_lossy(s).into_owned();
    }
    let fixed: Vec<u8> = {
        let mut v = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            if s[i] == 0xC0 && s.get(i + 1) == Some(&0x80) {
                v.push(0);
                i += 2;
            } else {
                v.push(s[i]);
                i += 1;
            }
        }
        v
    };
    String::from_utf8_lossy(&fixed).into_owned()
}
