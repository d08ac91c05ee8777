extension Node {
    /// Validates the structure of a branch or leaf page read from disk, so
    /// that the unchecked accessors above can never read outside the page.
    /// Key order is checked by `Database.check()`, not here: a page with keys
    /// out of order can give wrong answers but never a wild read.
    func validate(pageNumber: UInt32) throws {
        func bad(_ reason: String) -> StorageError { .corrupt(page: pageNumber, reason: reason) }
        let size = pageSize
        let type = bytes.load(fromByteOffset: 4, as: UInt8.self)
        guard type == PageType.leaf.rawValue || type == PageType.branch.rawValue else {
            throw bad("page type \(type) is not a tree page")
        }
        let n = count
        let slotsEnd = Layout.nodeHeaderSize + 2 * n
        let heap = heapStart
        guard slotsEnd <= heap, heap <= size else { throw bad("cell count \(n) and heap start \(heap) overlap") }
        guard fragmented <= size - heap else { throw bad("fragmented byte count \(fragmented) exceeds the heap") }
        let maxInline = Layout.maxInlineCell(pageSize: size)
        var total = 0
        for i in 0..<n {
            let off = slot(i)
            guard off >= heap, off < size else { throw bad("slot \(i) offset \(off) outside the cell heap") }
            let p = UnsafeRawPointer(bytes + off)
            let room = size - off
            var cell: Int
            if isLeaf {
                guard let (klen, a) = readVarint(p, limit: room), let (vlen, b) = readVarint(p + a, limit: room - a) else {
                    throw bad("cell \(i): unreadable lengths")
                }
                guard klen <= Database.maxKeyLength else { throw bad("cell \(i): key length \(klen)") }
                guard vlen <= Database.maxValueLength else { throw bad("cell \(i): value length \(vlen)") }
                if a + b + klen + vlen <= maxInline {
                    cell = a + b + klen + vlen
                } else {
                    cell = a + b + klen + 4
                    guard cell <= room else { throw bad("cell \(i) runs past the page end") }
                    guard loadBE32(p + a + b + klen) != 0 else { throw bad("cell \(i): overflow page 0") }
                }
            } else {
                guard room >= 5, let (klen, a) = readVarint(p + 4, limit: room - 4) else {
                    throw bad("cell \(i): unreadable branch cell")
                }
                guard klen <= Database.maxKeyLength else { throw bad("cell \(i): key length \(klen)") }
                cell = 4 + a + klen
                guard loadBE32(p) != 0 else { throw bad("cell \(i): child page 0") }
            }
            guard cell <= room else { throw bad("cell \(i) runs past the page end") }
            total += cell
        }
        guard total + fragmented == size - heap else {
            throw bad("cells (\(total) bytes) and holes (\(fragmented)) do not fill the heap (\(size - heap))")
        }
        if !isLeaf {
            guard rightChild != 0 else { throw bad("branch without a right-most child") }
        }
    }
}
