//! Checks a plugin library's ELF headers before `dlopen` sees it.
//!
//! The dynamic loader maps a library's segments as the headers describe them and trusts the
//! file to hold them: a library cut short (an interrupted copy, `head -c 4096`) is mapped
//! past its end, and the first touch of the missing pages kills the host with `SIGBUS`. A
//! library for another architecture gets "cannot open shared object file: No such file or
//! directory" from the loader, which sends the user looking for a file that is there. So
//! the host reads the headers itself first: an ELF shared object of this machine's class,
//! byte order and architecture, whose program headers and loaded segments lie inside the
//! file. Reading headers runs nothing, so this is safe on any file.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;

/// Whether `path` is an ELF shared object this process can map whole; `Err` says what is
/// wrong with it, in a few words that fit after "cannot be loaded (...)".
///
/// # Errors
///
/// The file cannot be read, is not ELF, is of another class, byte order or architecture,
/// is not a shared object, or is shorter than its headers and segments say.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let junk = dir.path().join("libjunk.so");
/// std::fs::write(&junk, b"not a library").unwrap();
/// let why = hermes_host::plugins::check_elf(&junk).unwrap_err();
/// assert!(why.starts_with("not an ELF file"), "{why}");
/// ```
pub fn check_elf(path: &Path) -> Result<(), String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?
        .len();
    let mut header = [0u8; 64];
    let got = read_up_to(&mut file, &mut header).map_err(|e| format!("cannot read it: {e}"))?;
    if got < 16 || header[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let class64 = match header[4] {
        1 => false,
        2 => true,
        other => return Err(format!("an ELF file of unknown class {other}")),
    };
    if class64 != cfg!(target_pointer_width = "64") {
        return Err(format!(
            "a {}-bit library, and this host is {}-bit",
            if class64 { 64 } else { 32 },
            if cfg!(target_pointer_width = "64") {
                64
            } else {
                32
            }
        ));
    }
    let little = match header[5] {
        1 => true,
        2 => false,
        other => return Err(format!("an ELF file of unknown byte order {other}")),
    };
    if little != cfg!(target_endian = "little") {
        return Err("a library of the other byte order".into());
    }
    let header_len = if class64 { 64 } else { 52 };
    if got < header_len {
        return Err(cut_short(size, header_len as u64));
    }
    let h = Fields {
        bytes: &header,
        little,
    };
    let e_type = h.u16(16);
    let machine = h.u16(18);
    if machine != host_machine() {
        return Err(format!(
            "built for {}, and this host is {}",
            machine_name(machine),
            machine_name(host_machine())
        ));
    }
    if e_type != ET_DYN {
        return Err(format!(
            "an ELF file of type {e_type}, not a shared library (type 3)"
        ));
    }
    let (phoff, phentsize, phnum, shoff, shentsize, shnum) = if class64 {
        (
            h.u64(32),
            h.u16(54),
            h.u16(56),
            h.u64(40),
            h.u16(58),
            h.u16(60),
        )
    } else {
        (
            u64::from(h.u32(28)),
            h.u16(42),
            h.u16(44),
            u64::from(h.u32(32)),
            h.u16(46),
            h.u16(48),
        )
    };
    let table_end = |offset: u64, entry: u16, count: u16| {
        offset.checked_add(u64::from(entry) * u64::from(count))
    };
    let ph_end = table_end(phoff, phentsize, phnum).ok_or("its program headers overflow")?;
    if ph_end > size {
        return Err(cut_short(size, ph_end));
    }
    if shnum > 0 {
        let sh_end = table_end(shoff, shentsize, shnum).ok_or("its section headers overflow")?;
        if sh_end > size {
            return Err(cut_short(size, sh_end));
        }
    }
    let mut table = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    file.seek(SeekFrom::Start(phoff))
        .and_then(|_| file.read_exact(&mut table))
        .map_err(|e| format!("cannot read its program headers: {e}"))?;
    for entry in table.chunks_exact(usize::from(phentsize.max(1))) {
        let p = Fields {
            bytes: entry,
            little,
        };
        if p.u32(0) != PT_LOAD {
            continue;
        }
        let (offset, filesz) = if class64 {
            (p.u64(8), p.u64(32))
        } else {
            (u64::from(p.u32(4)), u64::from(p.u32(16)))
        };
        let end = offset
            .checked_add(filesz)
            .ok_or("a segment's size overflows")?;
        if end > size {
            return Err(cut_short(size, end));
        }
    }
    Ok(())
}

fn cut_short(size: u64, needed: u64) -> String {
    format!(
        "the file is cut short: {size} bytes, and its headers describe {needed}; copy or build it again"
    )
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Little- or big-endian integers at offsets of a header (zero past its end).
struct Fields<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl Fields<'_> {
    fn take<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(slice) = self.bytes.get(at..at + N) {
            out.copy_from_slice(slice);
        }
        out
    }

    fn u16(&self, at: usize) -> u16 {
        let b = self.take::<2>(at);
        if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    }

    fn u32(&self, at: usize) -> u32 {
        let b = self.take::<4>(at);
        if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    }

    fn u64(&self, at: usize) -> u64 {
        let b = self.take::<8>(at);
        if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    }
}

/// `e_machine` of the architecture this host was built for.
fn host_machine() -> u16 {
    if cfg!(target_arch = "x86_64") {
        62
    } else if cfg!(target_arch = "aarch64") {
        183
    } else if cfg!(target_arch = "x86") {
        3
    } else if cfg!(target_arch = "arm") {
        40
    } else if cfg!(target_arch = "riscv64") {
        243
    } else if cfg!(target_arch = "powerpc64") {
        21
    } else if cfg!(target_arch = "s390x") {
        22
    } else {
        0
    }
}

fn machine_name(machine: u16) -> String {
    match machine {
        3 => "x86 (32-bit)".into(),
        8 => "MIPS".into(),
        20 => "PowerPC".into(),
        21 => "PowerPC 64".into(),
        22 => "s390x".into(),
        40 => "ARM (32-bit)".into(),
        62 => "x86_64".into(),
        183 => "aarch64".into(),
        243 => "RISC-V".into(),
        other => format!("ELF machine {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary is an ELF executable of this machine: a fine header, of the wrong
    /// type for a plugin, so a copy of it can be bent into each fault.
    fn own_binary() -> Vec<u8> {
        std::fs::read(std::env::current_exe().unwrap_or_default()).unwrap_or_default()
    }

    fn check_bytes(bytes: &[u8]) -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("libx.so");
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        check_elf(&path)
    }

    #[test]
    fn each_fault_is_named() {
        let mut exe = own_binary();
        assert!(exe.len() > 4096);
        // The test binary may be a position-independent executable (type 3 too); make it a
        // plain shared object for the baseline.
        exe[16] = 3;
        exe[17] = 0;
        assert_eq!(check_bytes(&exe), Ok(()));
        assert!(
            check_bytes(&exe[..4096])
                .unwrap_err()
                .starts_with("the file is cut short: 4096 bytes")
        );
        let mut other = exe.clone();
        other[18..20]
            .copy_from_slice(&if host_machine() == 183 { 62u16 } else { 183u16 }.to_le_bytes());
        let why = check_bytes(&other).unwrap_err();
        assert!(why.starts_with("built for "), "{why}");
        assert!(
            why.ends_with(&format!(
                "and this host is {}",
                machine_name(host_machine())
            )),
            "{why}"
        );
        let mut exec = exe.clone();
        exec[16] = 2;
        assert!(
            check_bytes(&exec)
                .unwrap_err()
                .contains("not a shared library")
        );
        assert_eq!(check_bytes(b"\x7fEL").unwrap_err(), "not an ELF file");
        assert_eq!(check_bytes(b"").unwrap_err(), "not an ELF file");
    }
}
