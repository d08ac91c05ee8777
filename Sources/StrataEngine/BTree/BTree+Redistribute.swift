/// Redistribution: before a full leaf splits, its cells may shift into a
/// neighbour under the same parent that has room (the B*-tree idea; SQLite's
/// balance does the same over three siblings). Random inserts then fill
/// leaves to about four fifths instead of the two thirds that plain
/// splitting gives, which makes the file smaller and the cache go further.
extension WriteTransaction {
    /// Tries to make room for `cell` (to go at `index` of the full leaf
    /// `number`) by moving cells to the right or left sibling. Returns false,
    /// having changed nothing, when neither sibling can take enough or the
    /// new separator does not fit in the parent.
    func redistribute(path: [(UInt32, Int)], number: UInt32, index: Int, cell: UnsafeRawPointer, size: Int) throws -> Bool {
        guard let (parentNumber, ci) = path.last else { return false }
        let parent = Node(page: try page(parentNumber))
        let node = Node(page: try writable(number))
        let capacity = db.pageSize - Layout.nodeHeaderSize
        // The node's cells with the new one in place, as (pointer, size).
        let n = node.count + 1
        var cells: [(UnsafeRawPointer, Int)] = []
        cells.reserveCapacity(n)
        for i in 0..<n {
            if i == index {
                cells.append((cell, size))
            } else {
                let j = i < index ? i : i - 1
                cells.append((UnsafeRawPointer(node.page.bytes + node.slot(j)), node.cellSize(j)))
            }
        }
        let total = cells.reduce(0) { $0 + $1.1 + 2 }

        // Right sibling takes a suffix; failing that, the left one a prefix.
        for toRight in [true, false] {
            guard toRight ? ci < parent.count : ci > 0 else { continue }
            let siblingNumber = parent.child(toRight ? ci + 1 : ci - 1)
            let sibling = try treeNode(siblingNumber)
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
                    cells: cells, keep: n - m, toRight: toRight, node: node, number: number,
                    siblingNumber: siblingNumber, parentNumber: parentNumber, separatorIndex: toRight ? ci : ci - 1)
            }
        }
        return false
    }

    /// Moves the cells beyond the first `keep` (toward the right sibling) or
    /// the first `cells.count - keep` (toward the left one), then replaces
    /// the separator between the two pages in the parent.
    private func apply(
        cells: [(UnsafeRawPointer, Int)], keep: Int, toRight: Bool, node: Node, number: UInt32,
        siblingNumber: UInt32, parentNumber: UInt32, separatorIndex: Int
    ) throws -> Bool {
        let moving = cells.count - keep
        // Copy every cell out first: the node is rebuilt in place.
        let pageSize = db.pageSize
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: 2 * pageSize, alignment: 16)
        defer { scratch.deallocate() }
        var copies: [(UnsafeRawPointer, Int)] = []
        copies.reserveCapacity(cells.count)
        var at = 0
        for (p, n) in cells {
            (scratch + at).copyMemory(from: p, byteCount: n)
            copies.append((UnsafeRawPointer(scratch + at), n))
            at += n
        }
        let staying = toRight ? copies[0..<keep] : copies[moving...]
        let leaving = toRight ? copies[keep...] : copies[0..<moving]

        // Check the parent can take the new separator before changing
        // anything: build the two pages' boundary keys from the copies.
        let parent = Node(page: try page(parentNumber))
        let oldSize = parent.cellSize(separatorIndex)
        // Both sides are non-empty by construction (the caller moves at least
        // one cell and keeps at least one); refuse rather than trap if not.
        guard let leftLast = toRight ? staying.last : leaving.last,
            let rightFirst = toRight ? leaving.first : staying.first
        else { return false }
        let leftChild = toRight ? number : siblingNumber
        let sep = UnsafeMutableRawPointer.allocate(byteCount: Database.maxKeyLength + 16, alignment: 8)
        defer { sep.deallocate() }
        let sepSize = buildSeparatorCell(sep, child: leftChild, leftLastCell: leftLast.0, rightFirstCell: rightFirst.0)
        guard sepSize - oldSize <= parent.freeBytes else { return false }

        let sibling = Node(page: try writable(siblingNumber))
        Node.format(node.page, leaf: true)
        for (i, c) in staying.enumerated() { _ = node.insertCell(at: i, c.0, c.1) }
        let base = toRight ? 0 : sibling.count
        for (i, c) in leaving.enumerated() {
            let ok = sibling.insertCell(at: base + i, c.0, c.1)
            precondition(ok, "redistribution fitted by construction")
        }
        let writableParent = Node(page: try writable(parentNumber))
        writableParent.removeCell(at: separatorIndex)
        let ok = writableParent.insertCell(at: separatorIndex, sep, sepSize)
        precondition(ok, "separator fitted by construction")
        modifications += 1
        return true
    }
}

/// The key of a leaf cell at `p`.
@inline(__always) func leafCellKey(_ p: UnsafeRawPointer) -> (UnsafeRawPointer, Int) {
    let (klen, a) = fastVarint(p)
    let (_, b) = fastVarint(p + a)
    return (p + a + b, klen)
}
