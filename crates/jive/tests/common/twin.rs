//! Two VMs of one class, one interpreting and one compiled
//! (`Vm::compile`), given the same invocations: after each, the same
//! result or fault, fuel used, fault site, checkpoint calls and heap.

#![allow(dead_code)]

use jive::{test_natives, Class, Limits, Vm};

/// The host of both VMs counts checkpoint calls.
fn hook(calls: &mut u32) {
    *calls += 1;
}

/// `vm.invoke`, or through `prepare` + `invoke_prepared` when `prepared`
/// and the method takes up to three `int`s.
fn call(
    vm: &mut Vm<u32>,
    h: &mut u32,
    id: jive::MethodId,
    args: &[i32],
    prepared: bool,
) -> Result<Option<i32>, jive::Fault> {
    if prepared {
        match *args {
            [] => {
                if let Ok(p) = vm.prepare::<0>(id) {
                    return vm.invoke_prepared(h, p, []);
                }
            }
            [a] => {
                if let Ok(p) = vm.prepare::<1>(id) {
                    return vm.invoke_prepared(h, p, [a]);
                }
            }
            [a, b] => {
                if let Ok(p) = vm.prepare::<2>(id) {
                    return vm.invoke_prepared(h, p, [a, b]);
                }
            }
            [a, b, c] => {
                if let Ok(p) = vm.prepare::<3>(id) {
                    return vm.invoke_prepared(h, p, [a, b, c]);
                }
            }
            _ => {}
        }
    }
    vm.invoke(h, id, args)
}

pub struct Twin {
    pub c: Class<u32>,
    pub interp: Vm<u32>,
    pub jit: Vm<u32>,
    pub compared: usize,
}

impl Twin {
    pub fn new(bytes: &[u8]) -> Twin {
        Twin::of(Class::load(bytes, &test_natives::<u32>(), &["test"]).expect("load"))
    }

    pub fn of(c: Class<u32>) -> Twin {
        let interp = Vm::new(c.clone(), Limits::default(), &mut 0).expect("construct");
        let mut jit = Vm::new(c.clone(), Limits::default(), &mut 0).expect("construct");
        let n = jit.compile().expect("compile");
        assert!(n > 0, "nothing was compiled");
        Twin {
            c,
            interp,
            jit,
            compared: 0,
        }
    }

    pub fn compiled(&self, m: &str) -> bool {
        self.jit.is_compiled(self.c.method(m).expect("method"))
    }

    pub fn set(&mut self, limits: Limits, checkpoint: Option<u64>) {
        for vm in [&mut self.interp, &mut self.jit] {
            vm.set_limits(limits);
            match checkpoint {
                Some(f) => vm.set_checkpoint(f, hook),
                None => vm.clear_checkpoint(),
            }
        }
    }

    /// [`Twin::set`] with the default limits but `fuel`.
    pub fn set_fuel(&mut self, fuel: u64, checkpoint: Option<u64>) {
        self.set(
            Limits {
                fuel,
                ..Limits::default()
            },
            checkpoint,
        );
    }

    /// Invoke `m` on both VMs and check that everything observable agrees.
    pub fn check(&mut self, m: &str, args: &[i32]) {
        let id = self.c.method(m).expect("method");
        let (mut h1, mut h2) = (0, 0);
        // Every other comparison enters through `invoke_prepared` (the
        // compiled fast path with the arguments in place), on one side or
        // the other.
        let k = self.compared % 4;
        let a = call(&mut self.interp, &mut h1, id, args, k == 3);
        let b = call(&mut self.jit, &mut h2, id, args, k == 1);
        let what = format!("{m}{args:?} limits {:?}", self.interp.limits());
        assert_eq!(a, b, "result of {what}");
        assert_eq!(
            self.interp.last_fuel_used(),
            self.jit.last_fuel_used(),
            "fuel used by {what} ({a:?})"
        );
        assert_eq!(
            self.interp.last_fault_site(),
            self.jit.last_fault_site(),
            "fault site of {what} ({a:?})"
        );
        assert_eq!(h1, h2, "checkpoint calls of {what}");
        assert_eq!(self.interp.heap_used(), self.jit.heap_used(), "{what}");
        assert_eq!(
            self.interp.live_arrays(),
            self.jit.live_arrays(),
            "live arrays after {what}"
        );
        self.compared += 1;
    }
}
