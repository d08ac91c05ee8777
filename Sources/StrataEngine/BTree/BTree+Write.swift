#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The B+tree's changes — insertion and deletion with splits and merges,
/// redistribution, overflow chains — on the pages of one write
/// transaction, which owns the pages: it hands out writable copies,
/// allocates and frees. The transaction's public operations call these.
///
/// Roots never move: when a root splits, its content moves to a new child
/// and the root becomes a branch above it; when a root branch is left with
/// a single child, the child's content moves up into the root.
struct BTreeWriter {
    /// The transaction whose pages change.
    let tx: WriteTransaction

    /// Inserts or replaces; returns true when the key is new.
    @discardableResult
    func putRaw(_ key: [UInt8], _ value: [UInt8], root: UInt32) throws -> Bool {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try putRaw(k, v, root: root) } }
    }

    /// As ``putRaw(_:_:root:)-([UInt8],_,_)``, from bytes the caller holds.
    @discardableResult
    func putRaw(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, root: UInt32) throws -> Bool {
        guard key.count <= Database.maxKeyLength else {
            throw StorageError.keyTooLong(length: key.count, maximum: Database.maxKeyLength)
        }
        guard value.count <= Database.maxValueLength else {
            throw StorageError.valueTooLarge(length: value.count, maximum: Database.maxValueLength)
        }
        return try put(key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, key.count, value.baseAddress, value.count, root: root)
    }

    private func put(
        _ key: UnsafeRawPointer, _ keyCount: Int, _ value: UnsafeRawPointer?, _ valueCount: Int, root: UInt32
    ) throws -> Bool {
        // The path's buffer is reused from put to put (one allocation per
        // transaction, not per put).
        var path = tx.takePathScratch()
        defer { tx.pathScratch = path }
        var landing = try land(key, keyCount, root: root, path: &path)
        let leaf = Node(page: try tx.writable(landing.number))
        let (index, found) = landing.bounds.lowerBound(key, keyCount, in: leaf)
        if found, case .overflow(let first, _) = leaf.leafValue(index) { try freeOverflow(first) }
        try store(key, keyCount, value, valueCount, in: leaf, at: index, found: found, &landing, &path, root: root)
        return !found
    }

    /// What ``update(_:root:_:)`` did.
    enum UpdateOutcome {
        /// The key is absent: nothing was called or changed.
        case absent
        /// The key holds the body's value.
        case updated
        /// The body changed the transaction itself, so the key's place may
        /// have moved: nothing was stored, and the caller puts `value` the
        /// usual way.
        case changedDuring(value: [UInt8])
    }

    /// Replaces the value of `key` with the one `body` makes from the
    /// stored one, with one search for both. `body` reads the stored value
    /// in place (inline) or from a copy (an overflow chain). An error
    /// `body` throws comes back as ``UpdateFailure`` with nothing changed.
    func update(
        _ key: UnsafeRawBufferPointer, root: UInt32, _ body: (UnsafeRawBufferPointer) throws -> [UInt8]
    ) throws -> UpdateOutcome {
        guard key.count <= Database.maxKeyLength else {
            throw StorageError.keyTooLong(length: key.count, maximum: Database.maxKeyLength)
        }
        let keyStart = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        var path = tx.takePathScratch()
        defer { tx.pathScratch = path }
        var landing = try land(keyStart, key.count, root: root, path: &path)
        // Read first: a key that is absent leaves its leaf unchanged (not
        // even copied for writing).
        let stored = try tx.treeNode(landing.number)
        let (index, found) = landing.bounds.lowerBound(keyStart, key.count, in: stored)
        guard found else { return .absent }
        let modifications = tx.modifications
        // Only the body's own errors are wrapped: reading an overflow chain
        // fails as any read does.
        let value: [UInt8]
        switch stored.leafValue(index) {
        case .inline(let p, let n):
            value = try withExtendedLifetime(stored.owner) {
                do { return try body(UnsafeRawBufferPointer(start: p, count: n)) } catch { throw UpdateFailure(error: error) }
            }
        case .overflow(let first, let length):
            let old = try tx.readOverflow(first: first, length: length)
            value = try old.withUnsafeBytes { bytes in
                do { return try body(bytes) } catch { throw UpdateFailure(error: error) }
            }
        }
        // A body that used the transaction (it should not) may have ended
        // it, or moved the key's cell: the index found is not trusted.
        if tx.ended { throw StorageError.transactionEnded }
        if tx.modifications != modifications { return .changedDuring(value: value) }
        guard value.count <= Database.maxValueLength else {
            throw StorageError.valueTooLarge(length: value.count, maximum: Database.maxValueLength)
        }
        // A writable copy of an unchanged page holds the cell at the same
        // index.
        let leaf = Node(page: try tx.writable(landing.number))
        if case .overflow(let first, _) = leaf.leafValue(index) { try freeOverflow(first) }
        try value.withUnsafeBytes { v in
            try store(keyStart, key.count, v.baseAddress, v.count, in: leaf, at: index, found: true, &landing, &path, root: root)
        }
        return .updated
    }

    /// An error thrown by the body of ``update(_:root:_:)``, before
    /// anything changed.
    struct UpdateFailure: Error {
        let error: any Error
    }

    /// Where a put or an update of one key lands: its leaf, the separators
    /// around it (an 8-byte key's place in it is interpolated between
    /// them), and whether the descent that found it recorded the path from
    /// the root, which only a split or a redistribution needs.
    private struct Landing {
        var number: UInt32
        var bounds: SeparatorBounds
        var rightmost = true
        var descended = false
    }

    /// The leaf of `key`: the one a finger holds, or the end of a descent.
    @inline(__always) private func land(
        _ key: UnsafeRawPointer, _ keyCount: Int, root: UInt32, path: inout [(UInt32, Int)]
    ) throws -> Landing {
        var landing = Landing(number: root, bounds: SeparatorBounds(keyCount: keyCount))
        if let finger = tx.fingerLeaf(root: root, key, keyCount), try tx.treeNode(finger.leaf).isLeaf {
            landing.number = finger.leaf
            landing.bounds.low = finger.low
            landing.bounds.high = finger.high
        } else {
            try descend(key, keyCount, root: root, &landing, &path)
        }
        return landing
    }

    /// Descends from `root` to the leaf of `key`, recording the path.
    private func descend(
        _ key: UnsafeRawPointer, _ keyCount: Int, root: UInt32, _ landing: inout Landing, _ path: inout [(UInt32, Int)]
    ) throws {
        path.removeAll(keepingCapacity: true)
        var number = root
        landing.rightmost = true
        var around = FingerBounds()
        while true {
            let node = try tx.treeNode(number)
            if node.isLeaf { break }
            let ci = node.childIndex(key, keyCount)
            if ci != node.count { landing.rightmost = false }
            around.narrow(to: node, child: ci)
            path.append((number, ci))
            guard path.count <= Cursor.maxDepth else {
                throw StorageError.corrupt(page: number, reason: "tree too deep: a cycle")
            }
            number = node.child(ci)
        }
        tx.takeFinger(root: root, leaf: number, around)
        landing.number = number
        landing.bounds.low = around.low
        landing.bounds.high = around.high
        landing.descended = true
    }

    /// Puts the cell of `key` and `value` at `index` of `leaf` (writable,
    /// the landing's leaf), replacing the cell there when `found` (whose
    /// overflow chain the caller freed), splitting or redistributing when
    /// it does not fit.
    @inline(__always) private func store(
        _ key: UnsafeRawPointer, _ keyCount: Int, _ value: UnsafeRawPointer?, _ valueCount: Int, in leaf: Node,
        at index: Int, found: Bool, _ landing: inout Landing, _ path: inout [(UInt32, Int)], root: UInt32
    ) throws {
        // Build the cell.
        let cell = tx.cellBuffer
        var size = writeVarint(cell, keyCount)
        size += writeVarint(cell + size, valueCount)
        if keyCount > 0 { (cell + size).copyMemory(from: key, byteCount: keyCount) }
        size += keyCount
        if size + valueCount <= Layout.maxInlineCell(pageSize: tx.db.pageSize) {
            if valueCount > 0, let value { (cell + size).copyMemory(from: value, byteCount: valueCount) }
            size += valueCount
        } else {
            let first = try writeOverflow(value!, valueCount)
            storeBE32(cell + size, first)
            size += 4
        }
        tx.modifications += 1
        if found {
            if leaf.replaceCell(at: index, cell, size) { return }
            leaf.removeCell(at: index)
        } else if index == leaf.count, index > 0, leaf.freeBytes - (size + 2) < growthRoom(root: root) {
            // An append that would leave less than the room to grow: at
            // the tree's right edge it starts a new leaf.
            try confirmLanding(key, keyCount, root: root, &landing, &path)
            if landing.rightmost {
                try splitInsert(path: &path, number: landing.number, index: index, cell: cell, size: size, appending: true)
                return
            }
        }
        if !leaf.insertCell(at: index, cell, size) {
            // Removing the old cell changed no separator: the descent ends
            // in this leaf.
            try confirmLanding(key, keyCount, root: root, &landing, &path)
            let number = landing.number
            let appending = landing.rightmost && index == leaf.count
            if !appending, try redistribute(path: path, number: number, index: index, cell: cell, size: size) {
                return
            }
            try splitInsert(path: &path, number: number, index: index, cell: cell, size: size, appending: appending)
        }
    }

    /// Makes `landing`, found through a finger, a descent's: with the path
    /// from the root and whether the leaf is the rightmost, which only a
    /// split or a redistribution needs.
    private func confirmLanding(
        _ key: UnsafeRawPointer, _ keyCount: Int, root: UInt32, _ landing: inout Landing, _ path: inout [(UInt32, Int)]
    ) throws {
        guard !landing.descended else { return }
        let fingered = landing.number
        try descend(key, keyCount, root: root, &landing, &path)
        guard landing.number == fingered else {
            throw StorageError.corrupt(page: fingered, reason: "a key between its leaf's separators descends elsewhere")
        }
    }

    /// The bytes an append at the right edge of the tree at `root` leaves
    /// free in its leaf: a sixteenth of the page for a tree the
    /// transaction leaves room to grow in
    /// (``WriteTransaction/leaveRoomToGrow(in:)``), none for others.
    @inline(__always) func growthRoom(root: UInt32) -> Int {
        tx.growthRoots.contains(root) ? tx.db.pageSize / 16 : 0
    }

    /// Puts key `start` of `keys`, and after it every following key that
    /// goes into the same leaf in place (ascending, below the leaf's upper
    /// bound, new, inline, with room left), with one descent; returns the
    /// index of the first key not put and how many keys were new. A first
    /// key that cannot go in that way takes `putRaw`.
    func putRun(_ keys: KeyBatch, from start: Int, values: (Int) -> [UInt8], root: UInt32) throws -> (next: Int, added: Int) {
        let run: (next: Int, added: Int) = try keys.withUnsafeBytes { all in
            let base = all.baseAddress ?? UnsafeRawPointer(bitPattern: 1).unsafelyUnwrapped
            @inline(__always) func key(_ index: Int) -> (UnsafeRawPointer, Int) {
                let range = keys.range(index)
                return (base + range.lowerBound, range.count)
            }
            let (firstPtr, firstCount) = key(start)
            guard firstCount <= Database.maxKeyLength else { return (start, 0) }
            // The leaf of the first key, and the separator its keys stay
            // below (copied: the branch page is not held past the descent).
            var number = root
            var node = try tx.treeNode(number)
            var upper: [UInt8]?
            var depth = 0
            while !node.isLeaf {
                let ci = node.childIndex(firstPtr, firstCount)
                if ci < node.count {
                    let (p, n) = node.key(ci)
                    upper = Array(UnsafeRawBufferPointer(start: p, count: n))
                }
                depth += 1
                guard depth <= Cursor.maxDepth else {
                    throw StorageError.corrupt(page: number, reason: "tree too deep: a cycle")
                }
                number = node.child(ci)
                node = try tx.treeNode(number)
            }
            let leaf = Node(page: try tx.writable(number))
            let cell = tx.cellBuffer
            let maxInline = Layout.maxInlineCell(pageSize: tx.db.pageSize)
            // The rightmost leaf (no separator above it) keeps its room to
            // grow: an append that would take it ends the run, and `put`
            // starts a new leaf.
            let room = upper == nil ? growthRoom(root: root) : 0
            var next = start
            var appendedPrevious = false
            while next < keys.count {
                let (keyPtr, keyCount) = key(next)
                guard keyCount <= Database.maxKeyLength else { break }
                if next > start {
                    let (previousPtr, previousCount) = key(next - 1)
                    guard compareBytes(previousPtr, previousCount, keyPtr, keyCount) < 0 else { break }
                }
                if let upper {
                    let below = upper.withUnsafeBytes { bound in
                        compareBytes(keyPtr, keyCount, bound.baseAddress ?? base, bound.count) < 0
                    }
                    guard below else { break }
                }
                let value = values(next)
                var size = writeVarint(cell, keyCount)
                size += writeVarint(cell + size, value.count)
                guard size + keyCount + value.count <= maxInline else { break }
                if keyCount > 0 { (cell + size).copyMemory(from: keyPtr, byteCount: keyCount) }
                size += keyCount
                if !value.isEmpty {
                    value.withUnsafeBytes { (cell + size).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                }
                size += value.count
                // Appends are the common case: past the leaf's last key,
                // which is known without a comparison when it is the key
                // put before this one.
                var index = leaf.count
                if index > 0 && !appendedPrevious {
                    let (lastPtr, lastCount) = leaf.key(index - 1)
                    if compareBytes(lastPtr, lastCount, keyPtr, keyCount) >= 0 {
                        let (at, found) = leaf.lowerBound(keyPtr, keyCount)
                        if found { break }
                        index = at
                    }
                }
                if index == leaf.count, index > 0, leaf.freeBytes - (size + 2) < room { break }
                guard leaf.insertCell(at: index, cell, size) else { break }
                appendedPrevious = index == leaf.count - 1
                tx.modifications += 1
                next += 1
            }
            return (next, next - start)
        }
        guard run.next == start else { return run }
        let added = try putRaw(keys[start], values(start), root: root)
        return (start + 1, added ? 1 : 0)
    }

    /// Removes `key` from the tree at `root`; rebalances on the way up.
    func deleteRaw(_ key: [UInt8], root: UInt32) throws -> Bool {
        guard key.count <= Database.maxKeyLength else { return false }
        // The path's buffer is reused, as a put's is.
        var path = tx.takePathScratch()
        defer { tx.pathScratch = path }
        return try key.withUnsafeBytes { k in
            let keyPtr = k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
            var number = root
            while true {
                let node = try tx.treeNode(number)
                if node.isLeaf {
                    let (index, found) = node.lowerBound(keyPtr, k.count)
                    guard found else { return false }
                    let leaf = Node(page: try tx.writable(number))
                    if case .overflow(let first, _) = leaf.leafValue(index) { try freeOverflow(first) }
                    leaf.removeCell(at: index)
                    tx.modifications += 1
                    try rebalance(path: &path, number: number)
                    return true
                }
                let ci = node.childIndex(keyPtr, k.count)
                path.append((number, ci))
                guard path.count <= Cursor.maxDepth else {
                    throw StorageError.corrupt(page: number, reason: "tree too deep: a cycle")
                }
                number = node.child(ci)
            }
        }
    }

    /// Removes every key of `keys` (ascending, without duplicates) that the
    /// tree at `root` holds, and returns how many it held. The keys that fall
    /// in one leaf cost one descent and one rebalance between them, so
    /// deleting a run of neighbouring keys costs about one delete per leaf.
    /// Keys out of order are still removed, each with its own descent.
    func deleteSortedRaw(_ keys: KeyBatch, root: UInt32) throws -> Int {
        var removed = 0
        var i = 0
        var doomed: [Int] = []
        var path = tx.takePathScratch()
        defer { tx.pathScratch = path }
        try keys.withUnsafeBytes { all in
            let base = all.baseAddress ?? UnsafeRawPointer(bitPattern: 1).unsafelyUnwrapped
            @inline(__always) func key(_ index: Int) -> (UnsafeRawPointer, Int) {
                let range = keys.range(index)
                return (base + range.lowerBound, range.count)
            }
            while i < keys.count {
                let (firstPtr, firstCount) = key(i)
                guard firstCount <= Database.maxKeyLength else {
                    i += 1
                    continue
                }
                path.removeAll(keepingCapacity: true)
                var number = root
                var node = try tx.treeNode(number)
                while !node.isLeaf {
                    let ci = node.childIndex(firstPtr, firstCount)
                    path.append((number, ci))
                    guard path.count <= Cursor.maxDepth else {
                        throw StorageError.corrupt(page: number, reason: "tree too deep: a cycle")
                    }
                    number = node.child(ci)
                    node = try tx.treeNode(number)
                }
                // Every key from the one this leaf was found for up to the
                // leaf's last key lies in this leaf; one past it belongs
                // further right (or is absent), one out of order is looked up
                // afresh. Ascending keys are searched for in the part of the
                // leaf after the previous one, and the leaf's cells are
                // removed together.
                doomed.removeAll(keepingCapacity: true)
                var next = i
                var from = 0
                let count = node.count
                if count > 0 {
                    let (lastPtr, lastCount) = node.key(count - 1)
                    while next < keys.count {
                        let (keyPtr, keyCount) = key(next)
                        guard keyCount <= Database.maxKeyLength else { break }
                        if next > i {
                            let (previousPtr, previousCount) = key(next - 1)
                            guard compareBytes(previousPtr, previousCount, keyPtr, keyCount) <= 0 else { break }
                        }
                        // A run of neighbours: the key is the next cell.
                        if from < count {
                            let (cellPtr, cellCount) = node.key(from)
                            let order = compareBytes(cellPtr, cellCount, keyPtr, keyCount)
                            if order >= 0 {
                                if order == 0 {
                                    doomed.append(from)
                                    from += 1
                                }
                                next += 1
                                continue
                            }
                        }
                        guard compareBytes(keyPtr, keyCount, lastPtr, lastCount) <= 0 else { break }
                        let (index, found) = node.lowerBound(keyPtr, keyCount, from: from)
                        if found {
                            if doomed.last != index { doomed.append(index) }
                            from = index + 1
                        } else {
                            from = index
                        }
                        next += 1
                    }
                }
                // The first key lies past this leaf's keys: it is absent.
                i = max(next, i + 1)
                guard !doomed.isEmpty else { continue }
                let leaf = Node(page: try tx.writable(number))
                for index in doomed {
                    if case .overflow(let first, _) = leaf.leafValue(index) { try freeOverflow(first) }
                }
                leaf.removeCells(sortedIndices: doomed)
                removed += doomed.count
                tx.modifications += 1
                try rebalance(path: &path, number: number)
            }
        }
        return removed
    }

    // MARK: Split

    /// Inserts `cell` at `index` of node `number`, which is full: splits the
    /// node and pushes a separator into its parent, recursively.
    private func splitInsert(
        path: inout [(UInt32, Int)], number: UInt32, index: Int, cell: UnsafeRawPointer, size: Int, appending: Bool
    ) throws {
        var target = number
        if path.isEmpty {
            // The root: move its content into a new child; the root becomes
            // a branch whose only child is that page.
            let rootPage = try tx.writable(number)
            let (child, childPage) = try tx.allocate(zeroed: false)
            childPage.bytes.copyMemory(from: rootPage.bytes, byteCount: tx.db.pageSize)
            Node(page: rootPage).reformat(leaf: false)
            Node(page: rootPage).setRightChild(child)
            path.append((number, 0))
            target = child
        }
        let node = Node(page: try tx.writable(target))
        let isLeaf = node.isLeaf
        if appending && isLeaf && index == node.count && index > 0 {
            // An append at the tree's right edge: the full leaf keeps its
            // cells where they are, and the new cell starts a right page,
            // so sequential loads pack densely.
            let (rightNumber, rightPage) = try tx.allocate(zeroed: false)
            Node.format(rightPage, leaf: true)
            let right = Node(page: rightPage)
            guard right.insertCell(at: 0, cell, size) else {
                throw StorageError.corrupt(page: target, reason: "a cell of \(size) bytes does not fit an empty page")
            }
            // `cell` may be the cell buffer: the separator is built from the
            // pages' copies.
            let sep = tx.cellBuffer
            let sepSize = buildSeparatorCell(
                sep, child: target, leftLastCell: node.bytes + node.slot(index - 1), rightFirstCell: right.bytes + right.slot(0))
            try pushSeparator(path: &path, right: rightNumber, sep, sepSize)
            return
        }
        let n = node.count + 1
        // Copy every cell, the new one included, into a scratch area in order.
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: 2 * tx.db.pageSize, alignment: 16)
        defer { scratch.deallocate() }
        var offsets = [Int](repeating: 0, count: n)
        var sizes = [Int](repeating: 0, count: n)
        var at = 0
        for i in 0..<n {
            let (src, len): (UnsafeRawPointer, Int)
            if i == index {
                (src, len) = (cell, size)
            } else {
                let j = i < index ? i : i - 1
                (src, len) = (UnsafeRawPointer(node.bytes + node.slot(j)), node.cellSize(j))
            }
            (scratch + at).copyMemory(from: src, byteCount: len)
            offsets[i] = at
            sizes[i] = len
            at += len
        }
        let oldRight = node.rightChild
        // Choose the split: left keeps cells [0, k), right gets [k, n) (for a
        // branch, cell k moves up instead), about half the bytes each.
        // (Appends at the right edge took the path above.)
        let total = sizes.reduce(0, +) + 2 * n
        var acc = 0
        var k = 0
        while k < n - 1 && acc + sizes[k] + 2 <= total / 2 {
            acc += sizes[k] + 2
            k += 1
        }
        k = max(1, min(k, isLeaf ? n - 1 : n - 2))
        // The right page is new: `format` zeroes it whole. The left one
        // holds its own cells, copied out above.
        let (rightNumber, rightPage) = try tx.allocate(zeroed: false)
        let right = Node(page: rightPage)
        node.reformat(leaf: isLeaf)
        Node.format(rightPage, leaf: isLeaf)
        for i in 0..<k { _ = node.insertCell(at: i, scratch + offsets[i], sizes[i]) }
        // The separator goes into a new branch cell: child = left page.
        let sep = tx.cellBuffer
        var sepSize = 0
        if isLeaf {
            for i in k..<n { _ = right.insertCell(at: i - k, scratch + offsets[i], sizes[i]) }
            sepSize = buildSeparatorCell(
                sep, child: target, leftLastCell: node.bytes + node.slot(k - 1),
                rightFirstCell: right.bytes + right.slot(0))
        } else {
            for i in (k + 1)..<n { _ = right.insertCell(at: i - k - 1, scratch + offsets[i], sizes[i]) }
            right.setRightChild(oldRight)
            let mid = scratch + offsets[k]
            node.setRightChild(loadBE32(mid))
            sep.copyMemory(from: mid, byteCount: sizes[k])
            storeBE32(sep, target)
            sepSize = sizes[k]
        }
        try pushSeparator(path: &path, right: rightNumber, sep, sepSize)
    }

    /// After a split of the node at the end of `path`: the parent's pointer
    /// that led to it now leads to the right page `right`, and the
    /// separator cell `sep` (whose child is the split node) goes just
    /// before it, splitting the parent in turn when it is full.
    private func pushSeparator(
        path: inout [(UInt32, Int)], right rightNumber: UInt32, _ sep: UnsafeMutableRawPointer, _ sepSize: Int
    )
        throws
    {
        let (parentNumber, ci) = path.removeLast()
        let parent = Node(page: try tx.writable(parentNumber))
        parent.setChild(ci, rightNumber)
        if !parent.insertCell(at: ci, sep, sepSize) {
            // `sep` lives in cellBuffer, which the recursive split reuses.
            let copy = UnsafeMutableRawPointer.allocate(byteCount: sepSize, alignment: 8)
            defer { copy.deallocate() }
            copy.copyMemory(from: sep, byteCount: sepSize)
            try splitInsert(path: &path, number: parentNumber, index: ci, cell: copy, size: sepSize, appending: false)
        }
    }

    /// Writes into `out` a branch cell pointing at `child` whose key is the
    /// shortest prefix of the right leaf cell's key that is still greater
    /// than the left leaf cell's key; returns its size.
    func buildSeparatorCell(
        _ out: UnsafeMutableRawPointer, child: UInt32, leftLastCell: UnsafeRawPointer, rightFirstCell: UnsafeRawPointer
    ) -> Int {
        let (lastKey, lastLen) = leafCellKey(leftLastCell)
        let (firstKey, firstLen) = leafCellKey(rightFirstCell)
        var prefix = 0
        while prefix < lastLen && prefix < firstLen
            && lastKey.load(fromByteOffset: prefix, as: UInt8.self) == firstKey.load(fromByteOffset: prefix, as: UInt8.self)
        {
            prefix += 1
        }
        let sepLen = min(prefix + 1, firstLen)
        storeBE32(out, child)
        var size = 4 + writeVarint(out + 4, sepLen)
        (out + size).copyMemory(from: firstKey, byteCount: sepLen)
        size += sepLen
        return size
    }
}
