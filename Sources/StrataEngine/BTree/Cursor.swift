import CStrataCRC32C

/// A position in a tree: seek, step forwards and backwards, read the entry.
///
/// Every positioning call returns true when the cursor rests on an entry.
/// In a write transaction a cursor survives changes to its tree: when the
/// tree changed since the cursor last moved, it first re-seeks the key it
/// was on, so that `next()` after deleting the current entry yields the
/// entry that followed it.
public final class Cursor {
    static let maxDepth = 40

    let tx: ReadTransaction
    let root: UInt32
    /// The handle the cursor was made from (nil for the catalog's cursor),
    /// checked whenever the cursor descends from the root: a tree dropped
    /// in the write transaction is not read through an old cursor.
    let tree: Tree?
    /// Branches on the path from the root: node and the child index taken.
    @exclusivity(unchecked) private var path: [(node: Node, index: Int)] = []
    @exclusivity(unchecked) private var leaf: Node? { didSet { leafBytes = leaf?.bytes } }
    /// The leaf's bytes: for a reader's steps within a leaf, which read the
    /// page through an owner-less ``Node`` and so copy no reference.
    @exclusivity(unchecked) private var leafBytes: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private var index = 0
    @exclusivity(unchecked) private var seenModification = 0
    /// The key under the cursor, kept to re-seek after a change.
    @exclusivity(unchecked) private var currentKey: [UInt8]?

    /// Whether the transaction writes: only then can the tree change under
    /// the cursor. A reader's pages never change while it lives.
    private let inWriter: Bool
    private let pageSize: Int

    convenience init(tx: ReadTransaction, root: UInt32) {
        self.init(tx: tx, root: root, tree: nil)
    }

    convenience init(tx: ReadTransaction, tree: Tree) {
        self.init(tx: tx, root: tree.root, tree: tree)
    }

    private init(tx: ReadTransaction, root: UInt32, tree: Tree?) {
        self.tx = tx
        self.root = root
        self.tree = tree
        inWriter = tx is WriteTransaction
        pageSize = tx.db.pageSize
    }

    /// True when the tree changed since the cursor last moved (a writer's
    /// puts and deletes), so that it must re-seek its key.
    @inline(__always) private var treeChanged: Bool { inWriter && tx.modificationCount != seenModification }

    /// The root, once the cursor's handle is checked (see ``Tree``).
    @inline(__always) private func checkedRoot() throws -> UInt32 {
        if let tree { try tx.checkHandle(tree) }
        return root
    }

    /// True when the cursor rests on an entry.
    public var isValid: Bool { leaf != nil }

    // MARK: Positioning

    /// Moves to the smallest key.
    @discardableResult public func first() throws -> Bool {
        try tx.checkOpen()
        path.removeAll(keepingCapacity: true)
        try descendEdge(fromKeepingPath: try checkedRoot(), leftmost: true)
        return try settleForward()
    }

    /// Moves to the largest key.
    @discardableResult public func last() throws -> Bool {
        try tx.checkOpen()
        path.removeAll(keepingCapacity: true)
        try descendEdge(fromKeepingPath: try checkedRoot(), leftmost: false)
        return try settleBackward()
    }

    /// Moves to the first key greater than or equal to `key`.
    @discardableResult public func seek(_ key: [UInt8]) throws -> Bool {
        try tx.checkOpen()
        return try key.withUnsafeBytes { k in
            try seek(k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count).valid
        }
    }

    func seek(_ key: UnsafeRawPointer, _ keyCount: Int) throws -> (valid: Bool, exact: Bool) {
        path.removeAll(keepingCapacity: true)
        var number = try checkedRoot()
        var bounds = SeparatorBounds(keyCount: keyCount)
        while true {
            let node = try tx.treeNode(number)
            if node.isLeaf {
                let (i, found) = bounds.lowerBound(key, keyCount, in: node)
                leaf = node
                index = i
                let valid = try settleForward()
                return (valid, found)
            }
            let ci = node.childIndex(key, keyCount)
            bounds.narrow(to: node, child: ci)
            path.append((node, ci))
            guard path.count <= Cursor.maxDepth else {
                throw StorageError.corrupt(page: number, reason: "tree deeper than \(Cursor.maxDepth) levels: a cycle")
            }
            number = node.child(ci)
        }
    }

    /// Moves to the next key; false (and invalid) past the last one.
    @discardableResult public func next() throws -> Bool {
        try tx.checkOpen()
        if !inWriter, let bytes = leafBytes {
            // A step within a reader's leaf reads its count and nothing else.
            let node = Node(mapped: bytes, pageSize: pageSize)
            index += 1
            if index < node.count {
                prefetchAhead(node)
                return true
            }
            return try settleForward()
        }
        guard leaf != nil else { return false }
        if try resyncIfChanged() == .movedPast { return leaf != nil }
        index += 1
        if let bytes = leafBytes { prefetchAhead(Node(mapped: bytes, pageSize: pageSize)) }
        return try settleForward()
    }

    /// Moves to the previous key; false (and invalid) before the first one.
    @discardableResult public func previous() throws -> Bool {
        try tx.checkOpen()
        guard leaf != nil else { return false }
        _ = try resyncIfChanged()
        guard leaf != nil else { return try last() }
        index -= 1
        return try settleBackward()
    }

    // MARK: Reading

    /// The key under the cursor.
    public func key() throws -> [UInt8] {
        try tx.checkOpen()
        if treeChanged, let currentKey { return currentKey }
        guard let leaf else { throw StorageError.invalidOptions("cursor is not positioned on an entry") }
        return leaf.keyBytes(index)
    }

    /// The value under the cursor (overflow chains are read in full).
    public func value() throws -> [UInt8] {
        try tx.checkOpen()
        if treeChanged { _ = try resyncIfChanged() }
        guard let leaf else { throw StorageError.invalidOptions("cursor is not positioned on an entry") }
        return try tx.leafValueBytes(leaf, index)
    }

    /// Calls `body` with the key and value under the cursor, without
    /// copying them out of the page when the value is stored inline (an
    /// overflow value is read into a temporary buffer). The buffers are
    /// valid only during the call.
    public func withEntry<R>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> R) throws -> R {
        try tx.checkOpen()
        if treeChanged { _ = try resyncIfChanged() }
        guard let bytes = leafBytes else { throw StorageError.invalidOptions("cursor is not positioned on an entry") }
        // `body` may move the cursor: the page stays alive until it returns
        // (a mapped page has no owner and needs nothing).
        let owner = leaf?.owner
        defer { withExtendedLifetime(owner) {} }
        let node = Node(mapped: bytes, pageSize: pageSize)
        let (kp, kn) = node.key(index)
        let key = UnsafeRawBufferPointer(start: kp, count: kn)
        switch node.leafValue(index) {
        case .inline(let vp, let vn):
            return try body(key, UnsafeRawBufferPointer(start: vp, count: vn))
        case .overflow(let first, let length):
            let value = try tx.readOverflow(first: first, length: length)
            return try value.withUnsafeBytes { try body(key, $0) }
        }
    }

    // MARK: Bulk reads

    /// Calls `body` with the key and value of each entry from the current
    /// one onwards, in key order, until it returns false or the tree ends;
    /// the cursor is left on the entry where `body` returned false (or is
    /// invalid past the end).
    ///
    /// The same as `withEntry` and `next()` in a loop, without their
    /// per-entry cost: the walk stays in the leaf's cells and the closure
    /// is not generic. Read transactions only: in a write transaction the
    /// tree must not change during the walk (use `next()` there).
    public func forEachEntry(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        try tx.checkOpen()
        if treeChanged { _ = try resyncIfChanged() }
        while let node = leaf {
            let count = node.count
            // One lifetime extension per leaf, not per entry.
            let stopped: Bool = try withExtendedLifetime(node.owner) {
                while index < count {
                    prefetchAhead(node)
                    let (kp, kn) = node.key(index)
                    let key = UnsafeRawBufferPointer(start: kp, count: kn)
                    let goOn: Bool
                    switch node.leafValue(index) {
                    case .inline(let vp, let vn):
                        goOn = try body(key, UnsafeRawBufferPointer(start: vp, count: vn))
                    case .overflow(let first, let length):
                        let value = try tx.readOverflow(first: first, length: length)
                        goOn = try value.withUnsafeBytes { try body(key, $0) }
                    }
                    if !goOn { return true }
                    index += 1
                }
                return false
            }
            if stopped {
                _ = positioned()
                return
            }
            guard try settleForward() else { return }
        }
    }

    /// Moves to the first key `>= key`, like `seek(_:)`, and returns whether
    /// it is equal to `key`. When the cursor already rests at or before
    /// `key`, the search starts from the lowest level of its path that can
    /// hold `key` instead of the root: a run of ascending lookups (the rows
    /// an index range yields) then costs mostly one leaf search each.
    public func seekForward(_ key: UnsafeRawBufferPointer) throws -> Bool {
        try tx.checkOpen()
        let pointer = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        guard !treeChanged, let node = leaf, index < node.count else {
            return try seek(pointer, key.count).exact
        }
        let (cp, cn) = node.key(index)
        let order = compareBytes(cp, cn, pointer, key.count)
        if order == 0 { return true }
        if order > 0 { return try seek(pointer, key.count).exact }
        // The key lies after the current one: in this leaf when it is not
        // past the leaf's last key.
        let (lp, ln) = node.key(node.count - 1)
        if compareBytes(lp, ln, pointer, key.count) >= 0 {
            let (i, found) =
                key.count == 8
                ? node.interpolatedLowerBound(
                    pointer, from: index + 1, low: (index, Node.prefix(cp, cn)),
                    high: (node.count - 1, Node.prefix(lp, ln)))
                : node.lowerBound(pointer, key.count, from: index + 1)
            index = i
            _ = positioned()
            return found
        }
        // Climb to the deepest level whose chosen child is bounded above by
        // a separator greater than the key. The key lies in that child (it
        // is past the current key, which lies there too), so the descent
        // starts at the child, not at the branch that chose it; a key that
        // no separator on the path bounds is found from the root, which
        // bounds every key (rebuilding the path from the root for every
        // lookup that left its leaf cost one more branch search each).
        guard !path.isEmpty else { return try seek(pointer, key.count).exact }
        var start = 0
        var level = path.count - 1
        while level >= 0 {
            let (branch, taken) = path[level]
            if taken < branch.count {
                let (sp, sn) = branch.key(taken)
                if compareBytes(sp, sn, pointer, key.count) > 0 {
                    start = level + 1
                    break
                }
            }
            level -= 1
        }
        if start == path.count {
            // Below the leaf's separator yet past its last key: absent, and
            // the next entry is the first of the following leaf.
            index = node.count
            _ = try settleForward()
            return false
        }
        let taken = path[start].node.childIndex(pointer, key.count)
        path[start].index = taken
        var number = path[start].node.child(taken)
        // The separators around the path's children from `start` up bound
        // the key; the deepest are the tightest.
        var bounds = SeparatorBounds(keyCount: key.count)
        var up = start
        while up >= 0 && bounds.needsMore {
            bounds.fill(from: path[up].node, child: path[up].index)
            up -= 1
        }
        // The levels below are overwritten in place (the path keeps its
        // length in a tree whose leaves are all at one depth), not removed
        // and appended again.
        var depth = start + 1
        while true {
            let next = try tx.treeNode(number)
            if next.isLeaf {
                if path.count > depth { path.removeSubrange(depth...) }
                let (i, found) = bounds.lowerBound(pointer, key.count, in: next)
                leaf = next
                index = i
                let valid = try settleForward()
                return valid && found
            }
            let child = next.childIndex(pointer, key.count)
            bounds.narrow(to: next, child: child)
            if depth < path.count {
                path[depth] = (next, child)
            } else {
                path.append((next, child))
            }
            depth += 1
            guard depth <= Cursor.maxDepth else {
                throw StorageError.corrupt(page: number, reason: "tree deeper than \(Cursor.maxDepth) levels: a cycle")
            }
            number = next.child(child)
        }
    }

    /// Calls `body` with the value under the cursor (read in place when it
    /// is inline). Not generic, so it costs no more than a closure call
    /// from another module.
    public func readValue(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try tx.checkOpen()
        if treeChanged { _ = try resyncIfChanged() }
        guard let leaf else { throw StorageError.invalidOptions("cursor is not positioned on an entry") }
        try withExtendedLifetime(leaf.owner) {
            switch leaf.leafValue(index) {
            case .inline(let vp, let vn):
                try body(UnsafeRawBufferPointer(start: vp, count: vn))
            case .overflow(let first, let length):
                let value = try tx.readOverflow(first: first, length: length)
                try value.withUnsafeBytes { try body($0) }
            }
        }
    }

    /// The number of entries from the current one up to (not including)
    /// the first key `>= upper` (to the end when `upper` is nil). Whole
    /// leaves whose last key is below `upper` are counted without reading
    /// their cells. Leaves the cursor invalid.
    public func count(upTo upper: [UInt8]?) throws -> Int {
        try tx.checkOpen()
        if treeChanged { _ = try resyncIfChanged() }
        var total = 0
        try upper.withUnsafeBufferPointerIfPresent { bound in
            while let node = leaf {
                let count = node.count
                if let bound, index < count {
                    let (lp, ln) = node.key(count - 1)
                    let boundStart = bound.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                    if compareBytes(lp, ln, boundStart, bound.count) >= 0 {
                        // The bound falls in this leaf: count up to it.
                        let (end, _) = node.lowerBound(
                            bound.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, bound.count, from: index)
                        total += max(0, end - index)
                        invalidate()
                        return
                    }
                }
                total += max(0, count - index)
                index = count
                guard try settleForward() else { return }
            }
        }
        return total
    }

    // MARK: Internals

    private enum Resync { case unchanged, exact, movedPast }

    /// Re-seeks the remembered key after the tree changed underneath.
    private func resyncIfChanged() throws -> Resync {
        guard treeChanged, let key = currentKey else { return .unchanged }
        let (valid, exact) = try key.withUnsafeBytes { k in
            try seek(k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count)
        }
        if !valid { return .movedPast }
        return exact ? .exact : .movedPast
    }

    /// Asks for what a walk forwards from `index` in `node` reads soon.
    /// Cells lie in a leaf in the order they were put, not in key order, so
    /// a walk in key order misses the cache at each cell: this asks for the
    /// cell two ahead (the ordered scan of engine-bench: 70–74 ns per entry
    /// against 87–157 without). And each leaf is a page elsewhere in the
    /// file, whose first read missed the cache and the TLB: eight cells
    /// before the end, this asks for the next leaf's header when it is the
    /// next child of the same parent.
    @inline(__always) private func prefetchAhead(_ node: Node) {
        let count = node.count
        if index + 2 < count { strata_prefetch(node.bytes + node.slot(index + 2)) }
        if count - index == 8, let parent = path.last, parent.index < parent.node.count {
            tx.prefetchTreePage(parent.node.child(parent.index + 1))
        }
    }

    /// After moving forward: if the index ran off the leaf, climb to the next
    /// subtree and take its leftmost leaf.
    private func settleForward() throws -> Bool {
        while let node = leaf, index >= node.count {
            guard let up = path.lastIndex(where: { $0.index < $0.node.count }) else {
                invalidate()
                return false
            }
            path.removeSubrange((up + 1)...)
            path[up].index += 1
            let next = path[up].node.child(path[up].index)
            try descendEdge(fromKeepingPath: next, leftmost: true)
            // The cells a step's look-ahead (two cells on) never asks for.
            if let node = leaf, node.count > 2 {
                strata_prefetch(node.bytes + node.slot(1))
                strata_prefetch(node.bytes + node.slot(2))
            }
        }
        return positioned()
    }

    private func settleBackward() throws -> Bool {
        while leaf != nil, index < 0 {
            guard let up = path.lastIndex(where: { $0.index > 0 }) else {
                invalidate()
                return false
            }
            path.removeSubrange((up + 1)...)
            path[up].index -= 1
            let next = path[up].node.child(path[up].index)
            try descendEdge(fromKeepingPath: next, leftmost: false)
        }
        return positioned()
    }

    /// Like `descendEdge` but appends below the existing path.
    private func descendEdge(fromKeepingPath start: UInt32, leftmost: Bool) throws {
        var number = start
        while true {
            let node = try tx.treeNode(number)
            if node.isLeaf {
                leaf = node
                index = leftmost ? 0 : node.count - 1
                return
            }
            let ci = leftmost ? 0 : node.count
            path.append((node, ci))
            guard path.count <= Cursor.maxDepth else {
                throw StorageError.corrupt(page: number, reason: "tree deeper than \(Cursor.maxDepth) levels: a cycle")
            }
            number = node.child(ci)
        }
    }

    private func positioned() -> Bool {
        if inWriter { seenModification = tx.modificationCount }
        guard let leaf, index >= 0, index < leaf.count else {
            invalidate()
            return false
        }
        if inWriter { currentKey = leaf.keyBytes(index) }
        return true
    }

    private func invalidate() {
        leaf = nil
        currentKey = nil
        path.removeAll(keepingCapacity: true)
    }
}

extension Optional where Wrapped == [UInt8] {
    /// Calls `body` with the bytes of the array, or nil.
    fileprivate func withUnsafeBufferPointerIfPresent<R>(_ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        guard let self else { return try body(nil) }
        return try self.withUnsafeBytes { try body($0) }
    }
}

/// The prefixes (``Node/prefix(_:_:)``) of the separators either side of
/// the child a descent follows: every key in that child's subtree lies
/// between them, so a leaf search for an 8-byte key (a row id) can
/// interpolate between them (``Node/interpolatedLowerBound(_:from:low:high:)``).
/// For other keys it keeps nothing and leaves are binary-searched. A bound
/// is nil where the child is a branch's first or last and no level above
/// bounds it.
struct SeparatorBounds {
    /// True for 8-byte keys.
    let interpolates: Bool
    var low: UInt64?
    var high: UInt64?

    @inline(__always) init(keyCount: Int) { interpolates = keyCount == 8 }

    /// True while an interpolating search lacks a bound.
    var needsMore: Bool { interpolates && (low == nil || high == nil) }

    /// Takes the separators around `child` of `branch`, which bound the
    /// child more tightly than any level above.
    @inline(__always) mutating func narrow(to branch: Node, child: Int) {
        guard interpolates else { return }
        branch.narrowBounds(around: child, low: &low, high: &high)
    }

    /// Takes the separators around `child` of `branch` where no deeper
    /// level gave one (for a path walked upwards).
    @inline(__always) mutating func fill(from branch: Node, child: Int) {
        guard interpolates else { return }
        if low == nil && child > 0 {
            let (p, n) = branch.key(child - 1)
            low = Node.prefix(p, n)
        }
        if high == nil && child < branch.count {
            let (p, n) = branch.key(child)
            high = Node.prefix(p, n)
        }
    }

    /// `leaf.lowerBound(key, keyCount)`, interpolating between the bounds
    /// for an 8-byte key; a missing bound is replaced by the leaf's first
    /// or last key.
    @inline(__always) func lowerBound(_ key: UnsafeRawPointer, _ keyCount: Int, in leaf: Node) -> (Int, Bool) {
        let n = leaf.count
        guard interpolates, n > 1 else { return leaf.lowerBound(key, keyCount) }
        let lowBound: (Int, UInt64)
        if let low {
            lowBound = (0, low)
        } else {
            let (p, m) = leaf.key(0)
            lowBound = (0, Node.prefix(p, m))
        }
        let highBound: (Int, UInt64)
        if let high {
            highBound = (n, high)
        } else {
            let (p, m) = leaf.key(n - 1)
            highBound = (n - 1, Node.prefix(p, m))
        }
        return leaf.interpolatedLowerBound(key, from: 0, low: lowBound, high: highBound)
    }
}
