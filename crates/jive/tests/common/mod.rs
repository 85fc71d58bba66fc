//! A tiny class-file assembler for tests.
#![allow(dead_code)]

use std::collections::HashMap;

pub mod attack_jit;
pub mod attack_load;
pub mod fast;

/// Opcodes used by the tests.
pub mod op {
    pub const NOP: u8 = 0;
    pub const ACONST_NULL: u8 = 1;
    pub const ICONST_M1: u8 = 2;
    pub const ICONST_0: u8 = 3;
    pub const ICONST_1: u8 = 4;
    pub const ICONST_2: u8 = 5;
    pub const ICONST_3: u8 = 6;
    pub const ICONST_4: u8 = 7;
    pub const ICONST_5: u8 = 8;
    pub const LCONST_0: u8 = 9;
    pub const BIPUSH: u8 = 16;
    pub const SIPUSH: u8 = 17;
    pub const LDC: u8 = 18;
    pub const ILOAD: u8 = 21;
    pub const ALOAD: u8 = 25;
    pub const ILOAD_0: u8 = 26;
    pub const ILOAD_1: u8 = 27;
    pub const ILOAD_2: u8 = 28;
    pub const ALOAD_0: u8 = 42;
    pub const ALOAD_1: u8 = 43;
    pub const IALOAD: u8 = 46;
    pub const BALOAD: u8 = 51;
    pub const SALOAD: u8 = 53;
    pub const ISTORE: u8 = 54;
    pub const ISTORE_0: u8 = 59;
    pub const ISTORE_1: u8 = 60;
    pub const ISTORE_2: u8 = 61;
    pub const ASTORE_0: u8 = 75;
    pub const ASTORE_1: u8 = 76;
    pub const IASTORE: u8 = 79;
    pub const BASTORE: u8 = 84;
    pub const SASTORE: u8 = 86;
    pub const POP: u8 = 87;
    pub const DUP: u8 = 89;
    pub const DUP_X1: u8 = 90;
    pub const DUP2: u8 = 92;
    pub const SWAP: u8 = 95;
    pub const IADD: u8 = 96;
    pub const ISUB: u8 = 100;
    pub const IMUL: u8 = 104;
    pub const IDIV: u8 = 108;
    pub const IREM: u8 = 112;
    pub const INEG: u8 = 116;
    pub const ISHL: u8 = 120;
    pub const ISHR: u8 = 122;
    pub const IUSHR: u8 = 124;
    pub const IINC: u8 = 132;
    pub const I2B: u8 = 145;
    pub const I2C: u8 = 146;
    pub const I2S: u8 = 147;
    pub const IFEQ: u8 = 153;
    pub const IFNE: u8 = 154;
    pub const IFLT: u8 = 155;
    pub const IF_ICMPGE: u8 = 162;
    pub const IF_ICMPLT: u8 = 161;
    pub const GOTO: u8 = 167;
    pub const JSR: u8 = 168;
    pub const TABLESWITCH: u8 = 170;
    pub const LOOKUPSWITCH: u8 = 171;
    pub const IRETURN: u8 = 172;
    pub const ARETURN: u8 = 176;
    pub const RETURN: u8 = 177;
    pub const GETSTATIC: u8 = 178;
    pub const PUTSTATIC: u8 = 179;
    pub const GETFIELD: u8 = 180;
    pub const PUTFIELD: u8 = 181;
    pub const INVOKEVIRTUAL: u8 = 182;
    pub const INVOKESPECIAL: u8 = 183;
    pub const INVOKESTATIC: u8 = 184;
    pub const INVOKEDYNAMIC: u8 = 186;
    pub const NEW: u8 = 187;
    pub const NEWARRAY: u8 = 188;
    pub const ANEWARRAY: u8 = 189;
    pub const ARRAYLENGTH: u8 = 190;
    pub const ATHROW: u8 = 191;
    pub const MONITORENTER: u8 = 194;
    pub const WIDE: u8 = 196;
    pub const IFNULL: u8 = 198;
    pub const T_BOOLEAN: u8 = 4;
    pub const T_BYTE: u8 = 8;
    pub const T_INT: u8 = 10;
}

pub const ACC_PUBLIC: u16 = 1;
pub const ACC_STATIC: u16 = 8;
pub const ACC_NATIVE: u16 = 0x100;
pub const PS: u16 = ACC_PUBLIC | ACC_STATIC;

/// Builds a class file; `this` is class `name`, super `java/lang/Object`.
pub struct Asm {
    cp: Vec<u8>,
    count: u16,
    utf: HashMap<String, u16>,
    pub major: u16,
    pub this: u16,
    pub super_class: u16,
    pub interfaces: Vec<u16>,
    fields: Vec<u8>,
    nfields: u16,
    methods: Vec<u8>,
    nmethods: u16,
}

pub fn be16(v: u16) -> [u8; 2] {
    v.to_be_bytes()
}

impl Asm {
    pub fn new(name: &str) -> Asm {
        let mut a = Asm {
            cp: Vec::new(),
            count: 1,
            utf: HashMap::new(),
            major: 52,
            this: 0,
            super_class: 0,
            interfaces: Vec::new(),
            fields: Vec::new(),
            nfields: 0,
            methods: Vec::new(),
            nmethods: 0,
        };
        a.this = a.class(name);
        a.super_class = a.class("java/lang/Object");
        a
    }
    fn entry(&mut self, bytes: &[u8]) -> u16 {
        self.cp.extend_from_slice(bytes);
        self.count += 1;
        self.count - 1
    }
    pub fn utf8(&mut self, s: &str) -> u16 {
        if let Some(&i) = self.utf.get(s) {
            return i;
        }
        let mut b = vec![1];
        b.extend_from_slice(&be16(s.len() as u16));
        b.extend_from_slice(s.as_bytes());
        let i = self.entry(&b);
        self.utf.insert(s.to_string(), i);
        i
    }
    pub fn class(&mut self, n: &str) -> u16 {
        let u = self.utf8(n);
        let mut b = vec![7];
        b.extend_from_slice(&be16(u));
        self.entry(&b)
    }
    pub fn nat(&mut self, n: &str, d: &str) -> u16 {
        let (a, b2) = (self.utf8(n), self.utf8(d));
        let mut b = vec![12];
        b.extend_from_slice(&be16(a));
        b.extend_from_slice(&be16(b2));
        self.entry(&b)
    }
    fn member(&mut self, tag: u8, c: &str, n: &str, d: &str) -> u16 {
        let ci = self.class(c);
        let ni = self.nat(n, d);
        let mut b = vec![tag];
        b.extend_from_slice(&be16(ci));
        b.extend_from_slice(&be16(ni));
        self.entry(&b)
    }
    pub fn fref(&mut self, c: &str, n: &str, d: &str) -> u16 {
        self.member(9, c, n, d)
    }
    pub fn mref(&mut self, c: &str, n: &str, d: &str) -> u16 {
        self.member(10, c, n, d)
    }
    pub fn int(&mut self, v: i32) -> u16 {
        let mut b = vec![3];
        b.extend_from_slice(&v.to_be_bytes());
        self.entry(&b)
    }
    pub fn string(&mut self, s: &str) -> u16 {
        let u = self.utf8(s);
        let mut b = vec![8];
        b.extend_from_slice(&be16(u));
        self.entry(&b)
    }
    pub fn field(&mut self, acc: u16, name: &str, desc: &str) {
        let (n, d) = (self.utf8(name), self.utf8(desc));
        self.fields.extend_from_slice(&be16(acc));
        self.fields.extend_from_slice(&be16(n));
        self.fields.extend_from_slice(&be16(d));
        self.fields.extend_from_slice(&be16(0));
        self.nfields += 1;
    }
    pub fn field_const(&mut self, acc: u16, name: &str, desc: &str, v: i32) {
        let (n, d) = (self.utf8(name), self.utf8(desc));
        let cv = self.utf8("ConstantValue");
        let k = self.int(v);
        self.fields.extend_from_slice(&be16(acc));
        self.fields.extend_from_slice(&be16(n));
        self.fields.extend_from_slice(&be16(d));
        self.fields.extend_from_slice(&be16(1));
        self.fields.extend_from_slice(&be16(cv));
        self.fields.extend_from_slice(&2u32.to_be_bytes());
        self.fields.extend_from_slice(&be16(k));
        self.nfields += 1;
    }
    pub fn method(
        &mut self,
        acc: u16,
        name: &str,
        desc: &str,
        stack: u16,
        locals: u16,
        code: &[u8],
    ) {
        self.method_ex(acc, name, desc, stack, locals, code, 0)
    }
    /// With `handlers` dummy exception-table entries.
    #[allow(clippy::too_many_arguments)]
    pub fn method_ex(
        &mut self,
        acc: u16,
        name: &str,
        desc: &str,
        stack: u16,
        locals: u16,
        code: &[u8],
        handlers: u16,
    ) {
        let (n, d, c) = (self.utf8(name), self.utf8(desc), self.utf8("Code"));
        let m = &mut self.methods;
        m.extend_from_slice(&be16(acc));
        m.extend_from_slice(&be16(n));
        m.extend_from_slice(&be16(d));
        m.extend_from_slice(&be16(1));
        m.extend_from_slice(&be16(c));
        let len = 2 + 2 + 4 + code.len() + 2 + 8 * handlers as usize + 2;
        m.extend_from_slice(&(len as u32).to_be_bytes());
        m.extend_from_slice(&be16(stack));
        m.extend_from_slice(&be16(locals));
        m.extend_from_slice(&(code.len() as u32).to_be_bytes());
        m.extend_from_slice(code);
        m.extend_from_slice(&be16(handlers));
        for _ in 0..handlers {
            m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
        }
        m.extend_from_slice(&be16(0));
        self.nmethods += 1;
    }
    /// A method without a Code attribute.
    pub fn method_nocode(&mut self, acc: u16, name: &str, desc: &str) {
        let (n, d) = (self.utf8(name), self.utf8(desc));
        let m = &mut self.methods;
        m.extend_from_slice(&be16(acc));
        m.extend_from_slice(&be16(n));
        m.extend_from_slice(&be16(d));
        m.extend_from_slice(&be16(0));
        self.nmethods += 1;
    }
    /// The usual constructor: `aload_0; invokespecial Object.<init>; return`.
    pub fn default_init(&mut self) {
        let r = self.mref("java/lang/Object", "<init>", "()V");
        let c = [
            op::ALOAD_0,
            op::INVOKESPECIAL,
            (r >> 8) as u8,
            r as u8,
            op::RETURN,
        ];
        self.method(ACC_PUBLIC, "<init>", "()V", 1, 1, &c);
    }
    pub fn build(&self) -> Vec<u8> {
        let mut b = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0];
        b.extend_from_slice(&be16(self.major));
        b.extend_from_slice(&be16(self.count));
        b.extend_from_slice(&self.cp);
        b.extend_from_slice(&be16(0x21));
        b.extend_from_slice(&be16(self.this));
        b.extend_from_slice(&be16(self.super_class));
        b.extend_from_slice(&be16(self.interfaces.len() as u16));
        for i in &self.interfaces {
            b.extend_from_slice(&be16(*i));
        }
        b.extend_from_slice(&be16(self.nfields));
        b.extend_from_slice(&self.fields);
        b.extend_from_slice(&be16(self.nmethods));
        b.extend_from_slice(&self.methods);
        b.extend_from_slice(&be16(0));
        b
    }
}

/// The two bytes of a constant-pool index or 16-bit operand.
pub fn hi(v: u16) -> u8 {
    (v >> 8) as u8
}
pub fn lo(v: u16) -> u8 {
    v as u8
}

/// A class `T` with a default constructor and one static method.
pub fn one(name: &str, desc: &str, stack: u16, locals: u16, code: &[u8]) -> Vec<u8> {
    let mut a = Asm::new("T");
    a.default_init();
    a.method(PS, name, desc, stack, locals, code);
    a.build()
}
