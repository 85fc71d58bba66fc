//! Signed division by a constant as a multiply-high and shifts
//! ([`DivMagic`]), which the lowering gives the division ops by constants.

/// Signed division by a constant as a multiply-high and shifts (the method
/// of Hacker's Delight §10-1), exact for every dividend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DivMagic {
    /// The divisor.
    pub divisor: i32,
    magic: i32,
    shift: u32,
}

impl DivMagic {
    /// Magic numbers for `divisor`; `None` for 0, 1, -1 and `i32::MIN`
    /// (left to the plain division op).
    pub fn new(divisor: i32) -> Option<DivMagic> {
        if matches!(divisor, 0 | 1 | -1 | i32::MIN) {
            return None;
        }
        let two31: u32 = 0x8000_0000;
        let ad = divisor.unsigned_abs();
        let t = two31 + ((divisor as u32) >> 31);
        let anc = t - 1 - t % ad;
        let mut p: u32 = 31;
        let (mut q1, mut r1) = (two31 / anc, two31 - (two31 / anc) * anc);
        let (mut q2, mut r2) = (two31 / ad, two31 - (two31 / ad) * ad);
        loop {
            p += 1;
            q1 = q1.wrapping_mul(2);
            r1 = r1.wrapping_mul(2);
            if r1 >= anc {
                q1 = q1.wrapping_add(1);
                r1 = r1.wrapping_sub(anc);
            }
            q2 = q2.wrapping_mul(2);
            r2 = r2.wrapping_mul(2);
            if r2 >= ad {
                q2 = q2.wrapping_add(1);
                r2 = r2.wrapping_sub(ad);
            }
            let delta = ad - r2;
            if !(q1 < delta || (q1 == delta && r1 == 0)) {
                break;
            }
            if p >= 63 {
                return None;
            }
        }
        let mut magic = q2.wrapping_add(1) as i32;
        if divisor < 0 {
            magic = magic.wrapping_neg();
        }
        Some(DivMagic {
            divisor,
            magic,
            shift: p - 32,
        })
    }

    /// `n / divisor` with Java semantics (truncation toward zero).
    #[inline(always)]
    pub fn div(&self, n: i32) -> i32 {
        let mut q = ((self.magic as i64 * n as i64) >> 32) as i32;
        if self.divisor > 0 && self.magic < 0 {
            q = q.wrapping_add(n);
        } else if self.divisor < 0 && self.magic > 0 {
            q = q.wrapping_sub(n);
        }
        q >>= self.shift;
        q.wrapping_add(((q as u32) >> 31) as i32)
    }

    /// `n % divisor` with Java semantics (sign of the dividend).
    #[inline(always)]
    pub fn rem(&self, n: i32) -> i32 {
        n.wrapping_sub(self.div(n).wrapping_mul(self.divisor))
    }
}

#[cfg(test)]
mod tests {
    use super::DivMagic;

    #[test]
    fn magic_division_matches_hardware() {
        let mut divisors: Vec<i32> = vec![
            2,
            3,
            5,
            6,
            7,
            9,
            10,
            11,
            16,
            25,
            100,
            641,
            1000,
            1009,
            1000003,
            65536,
            0x7fff_ffff,
            0x4000_0000,
            0x4000_0001,
            0x3fff_ffff,
        ];
        divisors.extend(divisors.clone().iter().map(|d| -d));
        let mut x: u64 = 1;
        let mut dividends: Vec<i32> = vec![
            0,
            1,
            -1,
            2,
            -2,
            i32::MAX,
            i32::MIN,
            i32::MIN + 1,
            i32::MAX - 1,
        ];
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            dividends.push((x >> 32) as i32);
            dividends.push(((x >> 40) as i32) - (1 << 23));
        }
        for &d in &divisors {
            let m = DivMagic::new(d).unwrap();
            for &n in &dividends {
                assert_eq!(m.div(n), n.wrapping_div(d), "{n} / {d}");
                assert_eq!(m.rem(n), n.wrapping_rem(d), "{n} % {d}");
                for k in [-1i32, 0, 1] {
                    let n2 = n.wrapping_add(k);
                    assert_eq!(m.div(n2), n2.wrapping_div(d), "{n2} / {d}");
                }
            }
        }
        assert!(DivMagic::new(0).is_none());
        assert!(DivMagic::new(-1).is_none());
        assert!(DivMagic::new(i32::MIN).is_none());
    }
}
