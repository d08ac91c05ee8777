import CStrataCRC32C

/// One page image in memory: `pageSize` bytes.
///
/// Pages that come from the cache are shared by readers and never mutated;
/// the writer mutates only its own private copies (see `WriteTransaction`).
///
/// Usually the bytes are allocated inline with the object (one allocation,
/// one cache line less to miss per page visited), after a small header. A
/// page of the memory-mapped main file is a *view*: its bytes are the
/// mapping's, read-only, and the page keeps the mapping alive.
final class Page: ManagedBuffer<Page.Header, UInt8> {
    struct Header {
        let size: Int
        let bytes: UnsafeMutableRawPointer
        /// The mapping a view reads; nil for a page that owns its bytes.
        let region: MappedRegion?
    }

    /// A read-only view of `size` mapped bytes at `bytes`. Only readers get
    /// views; the writer copies a page before changing it.
    static func view(_ bytes: UnsafeRawPointer, size: Int, region: MappedRegion) -> Page {
        let page = Page.create(minimumCapacity: 0) { _ in
            Header(size: size, bytes: UnsafeMutableRawPointer(mutating: bytes), region: region)
        }
        return unsafeDowncast(page, to: Page.self)
    }

    /// A page of `size` zero bytes.
    static func zeroed(_ size: Int) -> Page {
        let page = uninitialized(size)
        page.bytes.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        return page
    }

    /// A page whose bytes are about to be overwritten by a read.
    static func uninitialized(_ size: Int) -> Page {
        let page = Page.create(minimumCapacity: size) { buffer in
            Header(size: size, bytes: buffer.withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) }, region: nil)
        }
        return unsafeDowncast(page, to: Page.self)
    }

    /// A private copy of `other`.
    static func copy(of other: Page) -> Page {
        let page = uninitialized(other.size)
        page.bytes.copyMemory(from: other.bytes, byteCount: other.size)
        return page
    }

    // Field by field through the header's address: reading `header` whole
    // would copy it, retaining and releasing the region.
    @inline(__always) var size: Int { withUnsafeMutablePointerToHeader { $0.pointee.size } }
    @inline(__always) var bytes: UnsafeMutableRawPointer { withUnsafeMutablePointerToHeader { $0.pointee.bytes } }

    @inline(__always) func u8(_ offset: Int) -> UInt8 { bytes.load(fromByteOffset: offset, as: UInt8.self) }
    @inline(__always) func u16(_ offset: Int) -> Int { Int(loadBE16(bytes + offset)) }
    @inline(__always) func u32(_ offset: Int) -> UInt32 { loadBE32(bytes + offset) }
    @inline(__always) func u64(_ offset: Int) -> UInt64 { loadBE64(bytes + offset) }
    @inline(__always) func setU8(_ offset: Int, _ v: UInt8) { bytes.storeBytes(of: v, toByteOffset: offset, as: UInt8.self) }
    @inline(__always) func setU16(_ offset: Int, _ v: Int) { storeBE16(bytes + offset, UInt16(truncatingIfNeeded: v)) }
    @inline(__always) func setU32(_ offset: Int, _ v: UInt32) { storeBE32(bytes + offset, v) }
    @inline(__always) func setU64(_ offset: Int, _ v: UInt64) { storeBE64(bytes + offset, v) }

    /// The page checksum: CRC-32C of the page number followed by bytes
    /// `4..<size`. Binding the page number in means a page image written to
    /// the wrong place is caught as well as a damaged one.
    func computeChecksum(pageNumber: UInt32) -> UInt32 {
        Page.checksum(bytes, size: size, pageNumber: pageNumber)
    }

    /// The checksum of a page image at `bytes`.
    static func checksum(_ bytes: UnsafeRawPointer, size: Int, pageNumber: UInt32) -> UInt32 {
        var seed = pageNumber.bigEndian
        let crc = withUnsafeBytes(of: &seed) { raw in crc32c(0, raw.baseAddress!, 4) }
        return crc32c(crc, bytes + 4, size - 4)
    }

    func sealChecksum(pageNumber: UInt32) {
        setU32(0, computeChecksum(pageNumber: pageNumber))
    }

    func checksumMatches(pageNumber: UInt32) -> Bool {
        u32(0) == computeChecksum(pageNumber: pageNumber)
    }
}

@inline(__always) func loadBE16(_ p: UnsafeRawPointer) -> UInt16 {
    UInt16(bigEndian: p.loadUnaligned(as: UInt16.self))
}
@inline(__always) func loadBE32(_ p: UnsafeRawPointer) -> UInt32 {
    UInt32(bigEndian: p.loadUnaligned(as: UInt32.self))
}
@inline(__always) func loadBE64(_ p: UnsafeRawPointer) -> UInt64 {
    UInt64(bigEndian: p.loadUnaligned(as: UInt64.self))
}
@inline(__always) func storeBE16(_ p: UnsafeMutableRawPointer, _ v: UInt16) {
    p.storeBytes(of: v.bigEndian, as: UInt16.self)
}
@inline(__always) func storeBE32(_ p: UnsafeMutableRawPointer, _ v: UInt32) {
    p.storeBytes(of: v.bigEndian, as: UInt32.self)
}
@inline(__always) func storeBE64(_ p: UnsafeMutableRawPointer, _ v: UInt64) {
    p.storeBytes(of: v.bigEndian, as: UInt64.self)
}

/// CRC-32C (Castagnoli) of a byte range, continuing from `seed` (0 to
/// start): the checksum of every page, of the WAL header and of the WAL's
/// frame chain.
///
/// CRC-32C rather than zlib's CRC-32 because processors compute it in
/// hardware (SSE4.2, ARMv8 CRC): a 4 KiB page costs about 0.2 µs against
/// zlib's 1.25 µs on this project's machine, and a page read from disk pays
/// it every time. Like CRC-32 it catches every error burst of up to 32
/// bits; Castagnoli chose its polynomial for a larger Hamming distance at
/// these message lengths. `CStrataCRC32C` picks the instruction at run time
/// and falls back to a table, with the same result.
@inline(__always) package func crc32c(_ seed: UInt32, _ p: UnsafeRawPointer, _ count: Int) -> UInt32 {
    strata_crc32c(seed, p, count)
}

/// memcmp order of two byte strings; shorter first on a common prefix.
@inline(__always) func compareBytes(_ a: UnsafeRawPointer, _ aCount: Int, _ b: UnsafeRawPointer, _ bCount: Int) -> Int {
    let n = min(aCount, bCount)
    if n >= 8 {
        // Most keys differ in their first 8 bytes (row ids are exactly 8):
        // one big-endian word comparison instead of a call to memcmp.
        let order = compareWords(a, b)
        if order != 0 { return order }
        if n > 16 {
            let r = memcmp(a + 8, b + 8, n - 8)
            if r != 0 { return Int(r) }
        } else if n > 8 {
            // The last 8 of the n bytes: they overlap the first word, which
            // is equal, so this word orders the rest.
            let order = compareWords(a + (n - 8), b + (n - 8))
            if order != 0 { return order }
        }
    } else if n >= 4 {
        // Short keys (a branch's separators are cut to the bytes that
        // separate): the first 4 bytes, then the last 4, which overlap.
        let x = UInt32(bigEndian: a.loadUnaligned(as: UInt32.self))
        let y = UInt32(bigEndian: b.loadUnaligned(as: UInt32.self))
        if x != y { return x < y ? -1 : 1 }
        let u = UInt32(bigEndian: (a + (n - 4)).loadUnaligned(as: UInt32.self))
        let v = UInt32(bigEndian: (b + (n - 4)).loadUnaligned(as: UInt32.self))
        if u != v { return u < v ? -1 : 1 }
    } else {
        for i in 0..<n {
            let x = a.load(fromByteOffset: i, as: UInt8.self)
            let y = b.load(fromByteOffset: i, as: UInt8.self)
            if x != y { return x < y ? -1 : 1 }
        }
    }
    return aCount == bCount ? 0 : (aCount < bCount ? -1 : 1)
}

/// The order of the 8 bytes at `a` and at `b`, as big-endian words.
@inline(__always) private func compareWords(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer) -> Int {
    let x = UInt64(bigEndian: a.loadUnaligned(as: UInt64.self))
    let y = UInt64(bigEndian: b.loadUnaligned(as: UInt64.self))
    return x == y ? 0 : (x < y ? -1 : 1)
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
