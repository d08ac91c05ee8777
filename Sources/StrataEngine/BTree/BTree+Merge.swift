/// Merging and redistributing underfull pages after deletes, and the
/// overflow chains of large values.
extension BTreeWriter {
    /// After a delete: merges an under-full node with a sibling when both fit
    /// in one page, then fixes the parent the same way. A node is under-full
    /// below a quarter of its page; an empty leaf always merges, so no empty
    /// page stays in a tree except an empty root.
    func rebalance(path: inout [(UInt32, Int)], number: UInt32) throws {
        var current = number
        while true {
            let node = Node(page: try tx.writable(current))
            if path.isEmpty {
                // Root: collapse while it is a branch with a single child.
                var collapses = 0
                while !node.isLeaf && node.count == 0 {
                    let child = node.rightChild
                    let childPage = try tx.page(child)
                    node.bytes.copyMemory(from: childPage.bytes, byteCount: tx.db.pageSize)
                    tx.free(child)
                    collapses += 1
                    if collapses > Cursor.maxDepth { throw StorageError.corrupt(page: current, reason: "root collapse loops") }
                }
                return
            }
            let capacity = tx.db.pageSize - Layout.nodeHeaderSize
            if node.usedBytes >= capacity / 4 { return }
            let (parentNumber, ci) = path.removeLast()
            let parent = Node(page: try tx.writable(parentNumber))
            guard parent.count > 0 else { return }
            if node.isLeaf && node.count == 0 {
                // An emptied leaf leaves the tree with its separator: its
                // key range joins its right neighbour's (or, for the last
                // child, its left neighbour's). Merging it with a neighbour
                // instead copied that neighbour's cells into it, and a bulk
                // delete in key order, which empties leaf after leaf, copied
                // every following leaf once per leaf it emptied.
                if ci < parent.count {
                    parent.removeCell(at: ci)
                } else {
                    parent.setRightChild(parent.child(parent.count - 1))
                    parent.removeCell(at: parent.count - 1)
                }
                tx.free(current)
                tx.modifications += 1
                current = parentNumber
                continue
            }
            let sepIndex = ci > 0 ? ci - 1 : ci
            let leftNumber = parent.child(sepIndex)
            let rightNumber = parent.child(sepIndex + 1)
            let left = Node(page: try tx.writable(leftNumber))
            let right = Node(page: try tx.writable(rightNumber))
            guard left.isLeaf == right.isLeaf else {
                throw StorageError.corrupt(
                    page: parentNumber, reason: "children \(leftNumber) and \(rightNumber) are at different depths")
            }
            var needed = left.usedBytes + right.usedBytes
            if !left.isLeaf {
                let (_, sepLen) = parent.key(sepIndex)
                needed += 4 + varintSize(sepLen) + sepLen + 2
            }
            if needed > capacity { return }
            if !left.isLeaf {
                // The separator comes down, pointing at left's right-most child.
                let (sepKey, sepLen) = parent.key(sepIndex)
                let cell = tx.cellBuffer
                storeBE32(cell, left.rightChild)
                var size = 4 + writeVarint(cell + 4, sepLen)
                (cell + size).copyMemory(from: sepKey, byteCount: sepLen)
                size += sepLen
                _ = left.insertCell(at: left.count, cell, size)
                left.setRightChild(right.rightChild)
            }
            for i in 0..<right.count {
                let ok = left.insertCell(at: left.count, right.bytes + right.slot(i), right.cellSize(i))
                precondition(ok, "merge fitted by construction")
            }
            parent.removeCell(at: sepIndex)
            parent.setChild(sepIndex, leftNumber)
            tx.free(rightNumber)
            tx.modifications += 1
            current = parentNumber
        }
    }

    // MARK: Overflow

    /// Writes `count` bytes into a new chain of overflow pages.
    func writeOverflow(_ value: UnsafeRawPointer, _ count: Int) throws -> UInt32 {
        let capacity = Layout.overflowCapacity(pageSize: tx.db.pageSize)
        let pagesNeeded = (count + capacity - 1) / capacity
        var numbers: [UInt32] = []
        var pages: [Page] = []
        for _ in 0..<pagesNeeded {
            let (n, p) = try tx.allocate()
            numbers.append(n)
            pages.append(p)
        }
        var offset = 0
        for i in 0..<pagesNeeded {
            let page = pages[i]
            let used = min(capacity, count - offset)
            page.setU8(4, PageType.overflow.rawValue)
            page.setU32(8, i + 1 < pagesNeeded ? numbers[i + 1] : 0)
            page.setU32(12, UInt32(used))
            (page.bytes + Layout.overflowHeaderSize).copyMemory(from: value + offset, byteCount: used)
            offset += used
        }
        return numbers[0]
    }

    /// Frees an overflow chain.
    func freeOverflow(_ first: UInt32) throws {
        var number = first
        var steps = 0
        while number != 0 {
            let page = try tx.page(number)
            guard page.u8(4) == PageType.overflow.rawValue else {
                throw StorageError.corrupt(page: number, reason: "page type \(page.u8(4)) where an overflow page was expected")
            }
            let next = page.u32(8)
            tx.free(number)
            number = next
            steps += 1
            if steps > Int(tx.header.pageCount) { throw StorageError.corrupt(page: first, reason: "overflow chain loops") }
        }
    }
}
