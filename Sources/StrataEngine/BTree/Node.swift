/// A view of a branch or leaf page (layout in `PageLayout.swift`).
///
/// Pages read from disk pass `validate` once, before they enter the cache;
/// after that, every accessor may trust slot offsets and cell lengths.
/// Pages built by the writer are valid by construction.
struct Node {
    let page: Page

    @inline(__always) var isLeaf: Bool { page.u8(4) == PageType.leaf.rawValue }
    @inline(__always) var count: Int { page.u16(6) }
    @inline(__always) var heapStart: Int {
        let v = page.u16(8)
        return v == 0 ? page.size : v
    }
    @inline(__always) var fragmented: Int { page.u16(10) }
    @inline(__always) var rightChild: UInt32 { page.u32(12) }

    @inline(__always) func slot(_ i: Int) -> Int { page.u16(Layout.nodeHeaderSize + 2 * i) }

    /// Initializes an empty node of the given kind.
    static func format(_ page: Page, leaf: Bool) {
        page.bytes.initializeMemory(as: UInt8.self, repeating: 0, count: page.size)
        page.setU8(4, leaf ? PageType.leaf.rawValue : PageType.branch.rawValue)
        page.setU16(8, page.size == 65536 ? 0 : page.size)
    }

    func setCount(_ n: Int) { page.setU16(6, n) }
    func setHeapStart(_ v: Int) { page.setU16(8, v == 65536 ? 0 : v) }
    func setFragmented(_ v: Int) { page.setU16(10, v) }
    func setRightChild(_ v: UInt32) { page.setU32(12, v) }

    /// Bytes available for new cells and their slots, counting holes.
    var freeBytes: Int { heapStart - (Layout.nodeHeaderSize + 2 * count) + fragmented }
    /// Bytes used by slots and cells.
    var usedBytes: Int { page.size - Layout.nodeHeaderSize - freeBytes }

    // MARK: Cells

    /// Key of cell `i`: pointer and length.
    @inline(__always) func key(_ i: Int) -> (UnsafeRawPointer, Int) {
        let off = slot(i)
        let p = UnsafeRawPointer(page.bytes + off)
        if isLeaf {
            var pos = 0
            let (klen, a) = fastVarint(p)
            pos += a
            let (_, b) = fastVarint(p + pos)
            pos += b
            return (p + pos, klen)
        } else {
            let (klen, a) = fastVarint(p + 4)
            return (p + 4 + a, klen)
        }
    }

    func keyBytes(_ i: Int) -> [UInt8] {
        let (p, n) = key(i)
        return [UInt8](UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Child page of branch cell `i`, or the right-most child for `i == count`.
    @inline(__always) func child(_ i: Int) -> UInt32 {
        i == count ? rightChild : page.u32(slot(i))
    }

    func setChild(_ i: Int, _ v: UInt32) {
        if i == count { setRightChild(v) } else { page.setU32(slot(i), v) }
    }

    /// Leaf cell `i`: value length, and either the inline value or the first
    /// overflow page.
    @inline(__always) func leafValue(_ i: Int) -> LeafValue {
        let off = slot(i)
        let p = UnsafeRawPointer(page.bytes + off)
        let (klen, a) = fastVarint(p)
        let (vlen, b) = fastVarint(p + a)
        let payload = p + a + b + klen
        if a + b + klen + vlen <= Layout.maxInlineCell(pageSize: page.size) {
            return .inline(payload, vlen)
        }
        return .overflow(firstPage: loadBE32(payload), length: vlen)
    }

    /// Size in bytes of cell `i`.
    func cellSize(_ i: Int) -> Int {
        let p = UnsafeRawPointer(page.bytes + slot(i))
        if isLeaf {
            let (klen, a) = fastVarint(p)
            let (vlen, b) = fastVarint(p + a)
            let inline = a + b + klen + vlen
            return inline <= Layout.maxInlineCell(pageSize: page.size) ? inline : a + b + klen + 4
        } else {
            let (klen, a) = fastVarint(p + 4)
            return 4 + a + klen
        }
    }

    /// Index of the first cell whose key is >= `key`, and whether it is equal.
    /// Cells before `from` are known to be less than `key`.
    @inline(__always) func lowerBound(_ key: UnsafeRawPointer, _ keyCount: Int, from: Int = 0) -> (Int, Bool) {
        var lo = from
        var hi = count
        while lo < hi {
            let mid = (lo &+ hi) >> 1
            let (kp, kn) = self.key(mid)
            let c = compareBytes(kp, kn, key, keyCount)
            if c < 0 {
                lo = mid + 1
            } else if c == 0 {
                return (mid, true)
            } else {
                hi = mid
            }
        }
        return (lo, false)
    }

    /// The child index to follow in a branch for `key`: the first cell whose
    /// key is greater than `key`, or `count` for the right-most child.
    @inline(__always) func childIndex(_ key: UnsafeRawPointer, _ keyCount: Int) -> Int {
        var lo = 0
        var hi = count
        while lo < hi {
            let mid = (lo &+ hi) >> 1
            let (kp, kn) = self.key(mid)
            if compareBytes(kp, kn, key, keyCount) <= 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    // MARK: Mutation (writer-owned pages only)

    /// Inserts a raw cell at slot index `i`; returns false when it does not fit.
    func insertCell(at i: Int, _ cell: UnsafeRawPointer, _ size: Int) -> Bool {
        let n = count
        let slotsEnd = Layout.nodeHeaderSize + 2 * n
        var heap = heapStart
        if heap - slotsEnd < size + 2 {
            guard freeBytes >= size + 2 else { return false }
            defragment()
            heap = heapStart
        }
        heap -= size
        (page.bytes + heap).copyMemory(from: cell, byteCount: size)
        setHeapStart(heap)
        let slotBase = page.bytes + Layout.nodeHeaderSize
        if i < n {
            memmove(slotBase + 2 * (i + 1), slotBase + 2 * i, 2 * (n - i))
        }
        page.setU16(Layout.nodeHeaderSize + 2 * i, heap)
        setCount(n + 1)
        return true
    }

    /// Removes cell `i` (its bytes become a hole).
    func removeCell(at i: Int) {
        let n = count
        let size = cellSize(i)
        let off = slot(i)
        if off == heapStart {
            setHeapStart(off + size)
        } else {
            setFragmented(fragmented + size)
        }
        let slotBase = page.bytes + Layout.nodeHeaderSize
        if i < n - 1 {
            memmove(slotBase + 2 * i, slotBase + 2 * (i + 1), 2 * (n - 1 - i))
        }
        setCount(n - 1)
        if n == 1 {
            setHeapStart(page.size)
            setFragmented(0)
        }
    }

    /// Removes the cells at `indices` (ascending, distinct) in one pass over
    /// the slot array; their bytes become fragmented free space, as with
    /// ``removeCell(at:)``.
    func removeCells(sortedIndices indices: [Int]) {
        let n = count
        guard indices.count < n else {
            setCount(0)
            setHeapStart(page.size)
            setFragmented(0)
            return
        }
        var freed = 0
        var heap = heapStart
        // Cells appended in key order sit below one another, so going
        // backwards meets the one at the heap's start first and the heap
        // can shrink back over them instead of fragmenting.
        for index in indices.reversed() {
            let size = cellSize(index)
            if slot(index) == heap { heap += size } else { freed += size }
        }
        var write = indices[0]
        var k = 0
        for read in indices[0]..<n {
            if k < indices.count && indices[k] == read {
                k += 1
                continue
            }
            page.setU16(Layout.nodeHeaderSize + 2 * write, slot(read))
            write += 1
        }
        setCount(n - indices.count)
        setHeapStart(heap)
        setFragmented(fragmented + freed)
    }

    /// Rewrites the heap so that all free space is contiguous.
    func defragment() {
        let n = count
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: page.size, alignment: 16)
        defer { scratch.deallocate() }
        var heap = page.size
        for i in 0..<n {
            let size = cellSize(i)
            heap -= size
            (scratch + heap).copyMemory(from: page.bytes + slot(i), byteCount: size)
            page.setU16(Layout.nodeHeaderSize + 2 * i, heap)
        }
        (page.bytes + heap).copyMemory(from: scratch + heap, byteCount: page.size - heap)
        setHeapStart(heap)
        setFragmented(0)
    }
}

enum LeafValue {
    case inline(UnsafeRawPointer, Int)
    case overflow(firstPage: UInt32, length: Int)
}

/// Varint read for validated pages: no bounds check.
@inline(__always) func fastVarint(_ p: UnsafeRawPointer) -> (Int, Int) {
    let b0 = p.load(as: UInt8.self)
    if b0 < 0x80 { return (Int(b0), 1) }
    var result = Int(b0 & 0x7f)
    var shift = 7
    var i = 1
    while i < 5 {
        let b = p.load(fromByteOffset: i, as: UInt8.self)
        result |= Int(b & 0x7f) << shift
        i += 1
        if b & 0x80 == 0 { break }
        shift += 7
    }
    return (result, i)
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
