import CStrataCRC32C

/// Estimates and tree descents of a read transaction (statistics for the
/// query planner, and the descent every read starts with).
extension ReadTransaction {
    /// An estimate of how many entries of `tree` have `lower <= key < upper`
    /// (a nil bound is open), from two descents and no scan.
    ///
    /// Each descent places its key at a fraction of the tree: at every
    /// branch the child taken narrows the interval by the branch's fan-out,
    /// and the leaf's slot places it within the last one. The difference of
    /// the two fractions times the tree's entry count is the estimate. It
    /// assumes siblings hold about as many entries each, which a B+tree's
    /// fill bounds keep roughly true; query planners use it to compare
    /// access paths, never for results. A tree of at most
    /// ``exactEstimateLimit`` entries, whose few leaves can be far from
    /// equally full, is counted instead (whole leaves at a time).
    public func estimatedCount(_ tree: Tree, from lower: [UInt8]?, to upper: [UInt8]?) throws -> Double {
        let entries = try count(tree)
        guard entries > 0 else { return 0 }
        if entries <= Self.exactEstimateLimit {
            let cursor = try cursor(tree)
            guard try lower.map({ try cursor.seek($0) }) ?? cursor.first() else { return 0 }
            return Double(try cursor.count(upTo: upper))
        }
        let total = Double(entries)
        let start = try lower.map { try estimatedPosition(of: $0, root: tree.root) } ?? 0
        let end = try upper.map { try estimatedPosition(of: $0, root: tree.root) } ?? 1
        return max(0, end - start) * total
    }

    /// The most entries a tree may hold for ``estimatedCount(_:from:to:)``
    /// to count them.
    public static let exactEstimateLimit = 16_384

    /// Where `key` falls in the tree, as a fraction of its entries.
    private func estimatedPosition(of key: [UInt8], root: UInt32) throws -> Double {
        try key.withUnsafeBytes { k in
            let pointer = k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
            var number = root
            var low = 0.0
            var width = 1.0
            for _ in 0...Cursor.maxDepth {
                let node = try treeNode(number)
                if node.isLeaf {
                    let (index, _) = node.lowerBound(pointer, k.count)
                    return low + width * Double(index) / Double(max(node.count, 1))
                }
                let child = node.childIndex(pointer, k.count)
                let fanOut = Double(node.count + 1)
                low += width * Double(child) / fanOut
                width /= fanOut
                number = node.child(child)
            }
            throw StorageError.corrupt(page: number, reason: "tree deeper than \(Cursor.maxDepth) levels: a cycle")
        }
    }

    // MARK: Tree descent

    /// Descends from `root` to the leaf that holds or would hold `key` (an
    /// 8-byte key, a row id, is searched for in the leaf by interpolation
    /// between the separators the descent passed).
    @inline(__always) func search(root: UInt32, _ key: UnsafeRawPointer, _ keyCount: Int) throws -> (Node, Int, Bool) {
        var bounds = SeparatorBounds(keyCount: keyCount)
        if let finger = fingerLeaf(root: root, key, keyCount) {
            let node = try treeNode(finger.leaf)
            if node.isLeaf {
                bounds.low = finger.low
                bounds.high = finger.high
                let (index, found) = bounds.lowerBound(key, keyCount, in: node)
                return (node, index, found)
            }
            bounds = SeparatorBounds(keyCount: keyCount)
        }
        var number = root
        var depth = 0
        var around = FingerBounds()
        while true {
            let node = try treeNode(number)
            if node.isLeaf {
                takeFinger(root: root, leaf: number, around)
                let (index, found) = bounds.lowerBound(key, keyCount, in: node)
                return (node, index, found)
            }
            let child = node.childIndex(key, keyCount)
            bounds.narrow(to: node, child: child)
            if fingers != nil { around.narrow(to: node, child: child) }
            number = node.child(child)
            depth += 1
            if depth > Cursor.maxDepth {
                throw StorageError.corrupt(page: number, reason: "tree deeper than \(Cursor.maxDepth) levels: a cycle")
            }
        }
    }

    /// A page that must be a branch or a leaf: with a direct mapping a
    /// verified page is read straight from it (it passed the node check
    /// when it was verified), unless the writer (the only transaction with
    /// fingers) holds an image of its own; any other through ``page(_:)``.
    /// The type is checked either way: a verified overflow or freelist page
    /// is not a tree page.
    @inline(__always) func treeNode(_ number: UInt32) throws -> Node {
        let node: Node
        // After the handle closed, its reader mark is gone: another
        // process may rewrite the pages this snapshot would read.
        if db.closedForReads.load(ordering: .relaxed) { throw StorageError.closed }
        if let direct = directView, number < directPages, direct.isVerified(number),
            fingers == nil || !unsafeDowncast(self, to: WriteTransaction.self).holdsOwnImage(number)
        {
            node = Node(mapped: direct.address(of: number), pageSize: direct.pageSize)
        } else {
            node = Node(page: try self.page(number))
        }
        guard node.isLeaf || node.isBranch else {
            throw StorageError.corrupt(page: number, reason: "page type \(node.type) where a tree page was expected")
        }
        return node
    }

    /// Asks the CPU to start loading the first two cache lines of tree page
    /// `number` (its header and first slots) when the page is read through
    /// the mapping, checked already; a hint that reads nothing and changes
    /// nothing, for a cursor about to step into that page.
    @inline(__always) func prefetchTreePage(_ number: UInt32) {
        guard let direct = directView, number < directPages, direct.isVerified(number) else { return }
        let page = direct.address(of: number)
        strata_prefetch(page)
        strata_prefetch(page + 64)
    }

    func value(for key: [UInt8], root: UInt32) throws -> [UInt8]? {
        try key.withUnsafeBytes { k -> [UInt8]? in
            let (leaf, index, found) = try search(root: root, k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count)
            guard found else { return nil }
            return try leafValueBytes(leaf, index)
        }
    }

    func leafValueBytes(_ leaf: Node, _ index: Int) throws -> [UInt8] {
        switch leaf.leafValue(index) {
        case .inline(let p, let n):
            return [UInt8](UnsafeRawBufferPointer(start: p, count: n))
        case .overflow(let first, let length):
            return try readOverflow(first: first, length: length)
        }
    }

    /// Reads a whole overflow chain, validating each page.
    func readOverflow(first: UInt32, length: Int) throws -> [UInt8] {
        let capacity = Layout.overflowCapacity(pageSize: db.pageSize)
        var result = [UInt8](repeating: 0, count: length)
        var number = first
        var offset = 0
        try result.withUnsafeMutableBytes { out in
            while offset < length {
                guard number != 0 else {
                    throw StorageError.corrupt(page: first, reason: "overflow chain ends \(length - offset) bytes early")
                }
                let page = try self.page(number)
                guard page.u8(4) == PageType.overflow.rawValue else {
                    throw StorageError.corrupt(
                        page: number, reason: "page type \(page.u8(4)) where an overflow page was expected")
                }
                let used = Int(page.u32(12))
                guard used > 0, used <= capacity, used <= length - offset else {
                    throw StorageError.corrupt(page: number, reason: "overflow page holds \(used) bytes")
                }
                (out.baseAddress! + offset).copyMemory(from: page.bytes + Layout.overflowHeaderSize, byteCount: used)
                offset += used
                number = page.u32(8)
            }
        }
        return result
    }
}
