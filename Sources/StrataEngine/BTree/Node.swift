/// A view of a branch or leaf page (layout in `PageLayout.swift`).
///
/// Pages read from disk pass `validate` once, before they enter the cache;
/// after that, every accessor may trust slot offsets and cell lengths.
/// Pages built by the writer are valid by construction.
struct Node {
    /// The page image.
    let bytes: UnsafeMutableRawPointer
    let pageSize: Int
    /// The page object that owns `bytes` and keeps them alive; nil for a
    /// page of the mapped main file read without one, which the read
    /// transaction keeps mapped (``ReadTransaction/direct``). A node must
    /// not outlive the transaction it came from.
    let owner: Page?

    @inline(__always) init(page: Page) {
        bytes = page.bytes
        pageSize = page.size
        owner = page
    }

    @inline(__always) init(mapped bytes: UnsafeMutableRawPointer, pageSize: Int) {
        self.bytes = bytes
        self.pageSize = pageSize
        owner = nil
    }

    @inline(__always) private func u8(_ offset: Int) -> UInt8 { bytes.load(fromByteOffset: offset, as: UInt8.self) }
    @inline(__always) private func u16(_ offset: Int) -> Int { Int(loadBE16(bytes + offset)) }
    @inline(__always) private func u32(_ offset: Int) -> UInt32 { loadBE32(bytes + offset) }
    @inline(__always) private func setU8(_ offset: Int, _ v: UInt8) {
        bytes.storeBytes(of: v, toByteOffset: offset, as: UInt8.self)
    }
    @inline(__always) private func setU16(_ offset: Int, _ v: Int) {
        storeBE16(bytes + offset, UInt16(truncatingIfNeeded: v))
    }
    @inline(__always) private func setU32(_ offset: Int, _ v: UInt32) { storeBE32(bytes + offset, v) }

    @inline(__always) var type: UInt8 { u8(4) }
    @inline(__always) var isLeaf: Bool { type == PageType.leaf.rawValue }
    @inline(__always) var isBranch: Bool { type == PageType.branch.rawValue }
    @inline(__always) var count: Int { u16(6) }
    @inline(__always) var heapStart: Int {
        let v = u16(8)
        return v == 0 ? pageSize : v
    }
    @inline(__always) var fragmented: Int { u16(10) }
    @inline(__always) var rightChild: UInt32 { u32(12) }

    @inline(__always) func slot(_ i: Int) -> Int { u16(Layout.nodeHeaderSize + 2 * i) }

    /// Initializes an empty node of the given kind.
    static func format(_ page: Page, leaf: Bool) {
        Node(page: page).format(leaf: leaf)
    }

    func format(leaf: Bool) {
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: pageSize)
        reformat(leaf: leaf)
    }

    /// Empties a node whose bytes are its own earlier content, as a split
    /// does before it refills the page: only the header is cleared, as
    /// ``format(leaf:)`` would leave it (the heap's old bytes are not
    /// zeroed again).
    func reformat(leaf: Bool) {
        (bytes + 4).initializeMemory(as: UInt8.self, repeating: 0, count: Layout.nodeHeaderSize - 4)
        setU8(4, leaf ? PageType.leaf.rawValue : PageType.branch.rawValue)
        setU16(8, pageSize == 65536 ? 0 : pageSize)
    }

    func setCount(_ n: Int) { setU16(6, n) }
    func setHeapStart(_ v: Int) { setU16(8, v == 65536 ? 0 : v) }
    func setFragmented(_ v: Int) { setU16(10, v) }
    func setRightChild(_ v: UInt32) { setU32(12, v) }

    /// Bytes available for new cells and their slots, counting holes.
    var freeBytes: Int { heapStart - (Layout.nodeHeaderSize + 2 * count) + fragmented }
    /// Bytes used by slots and cells.
    var usedBytes: Int { pageSize - Layout.nodeHeaderSize - freeBytes }

    // MARK: Cells

    /// Key of cell `i`: pointer and length.
    @inline(__always) func key(_ i: Int) -> (UnsafeRawPointer, Int) {
        let off = slot(i)
        let p = UnsafeRawPointer(bytes + off)
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
        i == count ? rightChild : u32(slot(i))
    }

    func setChild(_ i: Int, _ v: UInt32) {
        if i == count { setRightChild(v) } else { setU32(slot(i), v) }
    }

    /// Leaf cell `i`: value length, and either the inline value or the first
    /// overflow page.
    @inline(__always) func leafValue(_ i: Int) -> LeafValue {
        let off = slot(i)
        let p = UnsafeRawPointer(bytes + off)
        let (klen, a) = fastVarint(p)
        let (vlen, b) = fastVarint(p + a)
        let payload = p + a + b + klen
        if a + b + klen + vlen <= Layout.maxInlineCell(pageSize: pageSize) {
            return .inline(payload, vlen)
        }
        return .overflow(firstPage: loadBE32(payload), length: vlen)
    }

    /// Size in bytes of cell `i`.
    @inline(__always) func cellSize(_ i: Int) -> Int {
        let p = UnsafeRawPointer(bytes + slot(i))
        // Most cells' lengths take one byte each (under 128): no varint
        // decoding then (a page compaction measures every cell).
        let first = Int(p.load(fromByteOffset: isLeaf ? 0 : 4, as: UInt8.self))
        if isLeaf {
            let second = Int(p.load(fromByteOffset: 1, as: UInt8.self))
            if first | second < 0x80, 2 + first + second <= Layout.maxInlineCell(pageSize: pageSize) {
                return 2 + first + second
            }
        } else if first < 0x80 {
            return 5 + first
        }
        return decodedCellSize(p)
    }

    /// Size in bytes of the cell at `p`, its lengths decoded.
    private func decodedCellSize(_ p: UnsafeRawPointer) -> Int {
        if isLeaf {
            let (klen, a) = fastVarint(p)
            let (vlen, b) = fastVarint(p + a)
            let inline = a + b + klen + vlen
            return inline <= Layout.maxInlineCell(pageSize: pageSize) ? inline : a + b + klen + 4
        } else {
            let (klen, a) = fastVarint(p + 4)
            return 4 + a + klen
        }
    }

    /// Index of the first cell whose key is >= `key`, and whether it is equal.
    /// Cells before `from` are known to be less than `key`.
    @inline(__always) func lowerBound(_ key: UnsafeRawPointer, _ keyCount: Int, from: Int = 0) -> (Int, Bool) {
        lowerBound(key, keyCount, from: from, below: count)
    }

    /// `lowerBound(_:_:from:)` among cells `from..<below`; the cell at
    /// `below` (or the end) is known to be greater than `key`.
    @inline(__always) func lowerBound(_ key: UnsafeRawPointer, _ keyCount: Int, from: Int, below: Int) -> (Int, Bool) {
        var lo = from
        var hi = below
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

    /// The first 8 bytes of a key as a big-endian number, zero-padded when
    /// the key is shorter. A key that sorts before another never has a
    /// greater prefix, so prefixes of keys that bound a key bound its prefix.
    @inline(__always) static func prefix(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        if n >= 8 { return UInt64(bigEndian: p.loadUnaligned(as: UInt64.self)) }
        var value: UInt64 = 0
        for i in 0..<n { value |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (56 - 8 * UInt64(i)) }
        return value
    }

    /// `lowerBound(_:_:from:)` for an 8-byte key (a row id), with the first
    /// probe placed by interpolation instead of at the middle.
    ///
    /// On a page not read recently every probe of a binary search is a
    /// cache miss (the cells lie all over the page), about log2(count) of
    /// them, and a lookup of rows scattered over a large table (the rows an
    /// index yields) meets such a page each time. Row ids are allocated in
    /// sequence, so a leaf of a record tree holds a nearly dense run of
    /// them, and the interpolated probe lands on the key or next to it: one
    /// miss. The probe is only a guess: a wrong one is corrected by
    /// galloping away from it (1, 2, 4… cells) and a binary search of the
    /// bracket found, so keys spread unevenly cost at most about twice a
    /// binary search, and any bounds give the right answer.
    ///
    /// - Parameters:
    ///   - low: a position and the prefix of a key at or below every key
    ///     from that position on (the key there, or the separator before
    ///     the page); `low.position <= from`.
    ///   - high: a position and the prefix of a key above every key before
    ///     that position (the separator after the page with position
    ///     `count`, or the last key with position `count - 1`);
    ///     `high.position > low.position`.
    func interpolatedLowerBound(
        _ key: UnsafeRawPointer, from: Int, low: (position: Int, prefix: UInt64), high: (position: Int, prefix: UInt64)
    ) -> (Int, Bool) {
        let n = count
        guard from < n else { return (from, false) }
        let k = UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
        var guess: Int
        if k <= low.prefix {
            guess = low.position
        } else if k >= high.prefix || high.position <= low.position {
            guess = high.position
        } else {
            // (k - low) / (high - low) < 1, so the quotient is below the
            // span of positions and cannot overflow.
            let span = UInt64(high.position - low.position)
            let product = (k - low.prefix).multipliedFullWidth(by: span)
            guess = low.position + Int((high.prefix - low.prefix).dividingFullWidth(product).quotient)
        }
        guess = min(max(guess, from), n - 1)
        let found = bracket(from: guess, lowest: from) { i in
            let (p, m) = self.key(i)
            return compareBytes(p, m, key, 8)
        }
        if let equal = found.equal { return (equal, true) }
        return lowerBound(key, 8, from: found.lo, below: found.hi)
    }

    /// From `guess`, brackets the first position at or after `lowest`
    /// whose cell does not order below the key, by probes at doubling
    /// distances: it lies in `lo...hi`, or is `equal` when a probe met a
    /// cell equal to the key. `order(i)` is negative for a cell below the
    /// key, zero for one equal to it and positive above; the cells are
    /// sorted, so its sign never decreases with `i`.
    @inline(__always) private func bracket(
        from guess: Int, lowest: Int, _ order: (Int) -> Int
    ) -> (lo: Int, hi: Int, equal: Int?) {
        let n = count
        let first = order(guess)
        if first == 0 { return (guess, guess, guess) }
        var lo = lowest
        var hi = n
        var step = 1
        if first < 0 {
            lo = guess + 1
            while guess + step < n {
                let i = guess + step
                let c = order(i)
                if c == 0 { return (i, i, i) }
                if c > 0 {
                    hi = i
                    break
                }
                lo = i + 1
                step <<= 1
            }
        } else {
            hi = guess
            while guess - step >= lowest {
                let i = guess - step
                let c = order(i)
                if c == 0 { return (i, i, i) }
                if c < 0 {
                    lo = i + 1
                    break
                }
                hi = i
                step <<= 1
            }
        }
        return (lo, hi, nil)
    }

    /// The child index to follow in a branch for `key`: the first cell whose
    /// key is greater than `key`, or `count` for the right-most child.
    ///
    /// On a branch of 16 or more separators whose first 8 bytes differ
    /// between the first and the last (keys of random bytes, row ids), the
    /// first probe is placed by interpolating the key's first 8 bytes
    /// between theirs, and the answer is bracketed around it by probes at
    /// doubling distances, then searched in the bracket: evenly spread keys
    /// land near the guess, where a binary search of a full branch takes
    /// eight or nine probes. Keys spread unevenly cost at most about twice
    /// the binary search's probes.
    @inline(__always) func childIndex(_ key: UnsafeRawPointer, _ keyCount: Int) -> Int {
        let n = count
        guard n >= 16 else { return childIndex(key, keyCount, in: 0, n) }
        let (fp, fn) = self.key(0)
        let (lp, ln) = self.key(n - 1)
        let low = Node.prefix(fp, fn)
        let high = Node.prefix(lp, ln)
        let k = Node.prefix(key, keyCount)
        guard low < k, k < high else { return childIndex(key, keyCount, in: 0, n) }
        // (k - low) / (high - low) < 1: the guess lies in 0..<n - 1.
        let product = (k - low).multipliedFullWidth(by: UInt64(n - 1))
        let guess = Int((high - low).dividingFullWidth(product).quotient)
        // The answer is the first separator above the key (or n): a
        // separator equal to the key orders below it here.
        let found = bracket(from: guess, lowest: 0) { i in
            let (p, m) = self.key(i)
            return compareBytes(p, m, key, keyCount) <= 0 ? -1 : 1
        }
        return childIndex(key, keyCount, in: found.lo, found.hi)
    }

    /// `childIndex(_:_:)` by binary search, knowing the answer lies in
    /// `lo...hi`.
    @inline(__always) func childIndex(_ key: UnsafeRawPointer, _ keyCount: Int, in lo: Int, _ hi: Int) -> Int {
        var lo = lo
        var hi = hi
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
        (bytes + heap).copyMemory(from: cell, byteCount: size)
        setHeapStart(heap)
        insertSlot(at: i, pointingAt: heap, count: n)
        return true
    }

    /// Inserts a raw cell at slot index `i` into the hole at offset `hole`,
    /// the bytes of a cell just removed, counted as fragmented and at least
    /// `size` long, when the gap between the slots and the heap holds the
    /// new slot but not the cell: the page then needs no compaction.
    /// Otherwise (the gap holds both, or the hole lies below the heap's
    /// start, where the removal gave it back to the gap) as
    /// ``insertCell(at:_:_:)``.
    func insertCell(at i: Int, _ cell: UnsafeRawPointer, _ size: Int, hole: Int) -> Bool {
        let n = count
        let gap = heapStart - (Layout.nodeHeaderSize + 2 * n)
        guard gap < size + 2, gap >= 2, hole >= heapStart, fragmented >= size else {
            return insertCell(at: i, cell, size)
        }
        (bytes + hole).copyMemory(from: cell, byteCount: size)
        setFragmented(fragmented - size)
        insertSlot(at: i, pointingAt: hole, count: n)
        return true
    }

    /// Opens slot `i` of the `n` and points it at the cell at `offset`.
    @inline(__always) private func insertSlot(at i: Int, pointingAt offset: Int, count n: Int) {
        let slotBase = bytes + Layout.nodeHeaderSize
        if i < n {
            memmove(slotBase + 2 * (i + 1), slotBase + 2 * i, 2 * (n - i))
        }
        setU16(Layout.nodeHeaderSize + 2 * i, offset)
        setCount(n + 1)
    }

    /// Puts `cell` in place of cell `i` and returns true when it fits
    /// there: when it is no larger (the bytes it leaves unused become a
    /// hole), or when the free gap between the slots and the heap holds
    /// what it adds. A larger cell then takes those bytes from the gap:
    /// the heap below the old cell moves down by the difference (one
    /// `memmove` and a pass over the slots). Returns false, changing
    /// nothing, when it fits neither way.
    ///
    /// Removing and inserting instead left the old cell as a hole and
    /// needed the new one whole from the gap, so on a full leaf every
    /// other replacement compacted the page (a fetch-modify-save of a
    /// tenth of 100,000 records: a sixth of its instructions).
    func replaceCell(at i: Int, _ cell: UnsafeRawPointer, _ size: Int) -> Bool {
        let old = cellSize(i)
        let offset = slot(i)
        guard size > old else {
            (bytes + offset).copyMemory(from: cell, byteCount: size)
            if size < old { setFragmented(fragmented + old - size) }
            return true
        }
        let grow = size - old
        let n = count
        let heap = heapStart
        guard heap - (Layout.nodeHeaderSize + 2 * n) >= grow else { return false }
        // Cells (and holes) from the heap's start up to the old cell move
        // down by `grow`; the new cell ends where the old one ended.
        memmove(bytes + heap - grow, bytes + heap, offset - heap)
        // Every slot below the old cell moves down by `grow`: a branchless
        // pass the compiler can vectorize (page offsets fit 16 bits).
        let slots = bytes + Layout.nodeHeaderSize
        let below = UInt16(truncatingIfNeeded: offset)
        let by = UInt16(truncatingIfNeeded: grow)
        for j in 0..<n {
            let at = UInt16(bigEndian: slots.loadUnaligned(fromByteOffset: 2 * j, as: UInt16.self))
            slots.storeBytes(of: (at &- (at < below ? by : 0)).bigEndian, toByteOffset: 2 * j, as: UInt16.self)
        }
        (bytes + offset - grow).copyMemory(from: cell, byteCount: size)
        setU16(Layout.nodeHeaderSize + 2 * i, offset - grow)
        setHeapStart(heap - grow)
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
        let slotBase = bytes + Layout.nodeHeaderSize
        if i < n - 1 {
            memmove(slotBase + 2 * i, slotBase + 2 * (i + 1), 2 * (n - 1 - i))
        }
        setCount(n - 1)
        if n == 1 {
            setHeapStart(pageSize)
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
            setHeapStart(pageSize)
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
            setU16(Layout.nodeHeaderSize + 2 * write, slot(read))
            write += 1
        }
        setCount(n - indices.count)
        setHeapStart(heap)
        setFragmented(fragmented + freed)
    }

    /// Rewrites the heap so that all free space is contiguous.
    func defragment() {
        let n = count
        let pageSize = pageSize
        withUnsafeTemporaryAllocation(byteCount: pageSize, alignment: 16) { buffer in
            let scratch = buffer.baseAddress!
            var heap = pageSize
            for i in 0..<n {
                let size = cellSize(i)
                heap -= size
                (scratch + heap).copyMemory(from: bytes + slot(i), byteCount: size)
                setU16(Layout.nodeHeaderSize + 2 * i, heap)
            }
            (bytes + heap).copyMemory(from: scratch + heap, byteCount: pageSize - heap)
            setHeapStart(heap)
        }
        setFragmented(0)
    }
}

enum LeafValue {
    case inline(UnsafeRawPointer, Int)
    case overflow(firstPage: UInt32, length: Int)
}

/// A cell length on a validated page: `Node.validate` has read every
/// cell's lengths through ``readVarint(_:limit:)`` with the same five-byte
/// bound, so this read cannot fail (the fallback is never taken).
@inline(__always) func fastVarint(_ p: UnsafeRawPointer) -> (Int, Int) {
    readVarint(p, limit: 5) ?? (0, 1)
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
