/// Redistribution: before a full leaf splits, its cells may shift into a
/// neighbour under the same parent that has room (the B*-tree idea; SQLite's
/// balance does the same over three siblings). Random inserts then fill
/// leaves to about four fifths instead of the two thirds that plain
/// splitting gives, which makes the file smaller and the cache go further.
extension BTreeWriter {
    /// The cells of a full leaf with a new cell in place at `index`, read
    /// where they lie: only the cells that move are ever looked at.
    struct CellsWithInsert {
        let node: Node
        let index: Int
        let cell: UnsafeRawPointer
        let size: Int

        var count: Int { node.count + 1 }

        subscript(i: Int) -> (UnsafeRawPointer, Int) {
            if i == index { return (cell, size) }
            let j = i < index ? i : i - 1
            return (UnsafeRawPointer(node.bytes + node.slot(j)), node.cellSize(j))
        }
    }

    /// Tries to make room for `cell` (to go at `index` of the full leaf
    /// `number`) by moving cells to the right or left sibling. Returns false,
    /// having changed nothing, when neither sibling can take enough or the
    /// new separator does not fit in the parent.
    func redistribute(path: [(UInt32, Int)], number: UInt32, index: Int, cell: UnsafeRawPointer, size: Int) throws -> Bool {
        guard let (parentNumber, ci) = path.last else { return false }
        let parent = Node(page: try tx.page(parentNumber))
        let node = Node(page: try tx.writable(number))
        let capacity = tx.db.pageSize - Layout.nodeHeaderSize
        let cells = CellsWithInsert(node: node, index: index, cell: cell, size: size)
        let n = cells.count
        // Slots and cells, the new one included (a validated page's byte
        // counts are exact: its cells and holes fill its heap).
        let total = node.usedBytes + size + 2

        // Right sibling takes a suffix; failing that, the left one a prefix.
        for toRight in [true, false] {
            guard toRight ? ci < parent.count : ci > 0 else { continue }
            let siblingNumber = parent.child(toRight ? ci + 1 : ci - 1)
            let sibling = try tx.treeNode(siblingNumber)
            guard sibling.isLeaf else { continue }
            // Move cells from the edge facing the sibling while the node is
            // above the balance point and the sibling has room.
            let room = sibling.freeBytes
            let target = (total + sibling.usedBytes) / 2
            var moved = 0
            var m = 0
            while m < n - 1 {
                let cs = cells[toRight ? n - 1 - m : m].1
                if moved + cs + 2 > room { break }
                if total - moved <= capacity && total - moved <= target { break }
                moved += cs + 2
                m += 1
            }
            if m > 0 && total - moved <= capacity {
                return try apply(
                    cells: cells, keep: n - m, toRight: toRight, number: number, siblingNumber: siblingNumber,
                    parent: parent, parentNumber: parentNumber, separatorIndex: toRight ? ci : ci - 1)
            }
        }
        return false
    }

    /// Moves the cells beyond the first `keep` (toward the right sibling) or
    /// the first `cells.count - keep` (toward the left one), then replaces
    /// the separator between the two pages in the parent. `cells` is the
    /// node's cells with the new one in place.
    ///
    /// The node is edited in place: the leaving cells are removed from it
    /// (their bytes become free space) and the new cell is inserted where it
    /// stays; the node is not rebuilt. A redistribution that moves a few
    /// cells then costs about what moving them costs, not a page rewrite
    /// (random inserts redistribute often: half the instructions of a bulk
    /// load went to rebuilding pages before).
    private func apply(
        cells: CellsWithInsert, keep: Int, toRight: Bool, number: UInt32, siblingNumber: UInt32,
        parent: Node, parentNumber: UInt32, separatorIndex: Int
    ) throws -> Bool {
        let node = cells.node
        let index = cells.index
        let moving = cells.count - keep
        let leaving = toRight ? keep..<cells.count : 0..<moving
        // Both sides are non-empty by construction (the caller moves at least
        // one cell and keeps at least one); refuse rather than trap if not.
        guard moving > 0, keep > 0 else { return false }

        // Check the parent can take the new separator before changing
        // anything: build it from the two pages' boundary cells, which are
        // still intact.
        let oldSize = parent.cellSize(separatorIndex)
        let leftLast = toRight ? cells[keep - 1].0 : cells[moving - 1].0
        let rightFirst = toRight ? cells[keep].0 : cells[moving].0
        let leftChild = toRight ? number : siblingNumber
        let sep = UnsafeMutableRawPointer.allocate(byteCount: Database.maxKeyLength + 16, alignment: 8)
        defer { sep.deallocate() }
        let sepSize = buildSeparatorCell(sep, child: leftChild, leftLastCell: leftLast, rightFirstCell: rightFirst)
        guard sepSize - oldSize <= parent.freeBytes else { return false }
        // Every page this changes is made writable before the first change:
        // making one may load it from disk and fail, and a failure after the
        // leaving cells left the node would lose them.
        let sibling = Node(page: try tx.writable(siblingNumber))
        let writableParent = Node(page: try tx.writable(parentNumber))

        // Copy the leaving cells out: removing them from the node frees
        // their bytes, and inserting the new cell may reuse them.
        let pageSize = tx.db.pageSize
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: 2 * pageSize, alignment: 16)
        defer { scratch.deallocate() }
        var copies: [(UnsafeRawPointer, Int)] = []
        copies.reserveCapacity(moving)
        var at = 0
        // The highest-placed leaving cell the new one fits in: when the
        // new cell stays, it goes there instead of making the node
        // compact its heap (the leaving cells' bytes become holes, which
        // only a compaction gives back otherwise).
        let newSize = cells[index].1
        var hole = -1
        for i in leaving {
            let (p, n) = cells[i]
            (scratch + at).copyMemory(from: p, byteCount: n)
            copies.append((UnsafeRawPointer(scratch + at), n))
            at += n
            if i != index && n >= newSize { hole = max(hole, UnsafeRawPointer(node.bytes).distance(to: p)) }
        }
        // The node's own indices of the leaving cells (the new cell is not
        // in the node yet).
        var doomed: [Int] = []
        doomed.reserveCapacity(moving)
        for i in leaving where i != index { doomed.append(i < index ? i : i - 1) }
        if !doomed.isEmpty { node.removeCells(sortedIndices: doomed) }
        if !leaving.contains(index) {
            let at = toRight ? index : index - moving
            let ok =
                hole >= 0
                ? node.insertCell(at: at, cells[index].0, newSize, hole: hole)
                : node.insertCell(at: at, cells[index].0, newSize)
            precondition(ok, "the staying cells fit by construction")
        }

        let base = toRight ? 0 : sibling.count
        for (i, c) in copies.enumerated() {
            let ok = sibling.insertCell(at: base + i, c.0, c.1)
            precondition(ok, "redistribution fitted by construction")
        }
        writableParent.removeCell(at: separatorIndex)
        let ok = writableParent.insertCell(at: separatorIndex, sep, sepSize)
        precondition(ok, "separator fitted by construction")
        tx.modifications += 1
        tx.shape &+= 1
        return true
    }
}

/// The key of a leaf cell at `p`.
@inline(__always) func leafCellKey(_ p: UnsafeRawPointer) -> (UnsafeRawPointer, Int) {
    let (klen, a) = fastVarint(p)
    let (_, b) = fastVarint(p + a)
    return (p + a + b, klen)
}
