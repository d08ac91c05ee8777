// The pages a write transaction changes: its private copies, new pages
// and freed ones.

extension WriteTransaction {
    /// A private copy of page `number` that this transaction may change.
    func writable(_ number: UInt32) throws -> Page {
        if let page = dirty[number] { return page }
        // A spilled page read back is this transaction's own copy already.
        let copy = try spilledImage(number) ?? Page.copy(of: try committedPage(number))
        dirty[number] = copy
        return copy
    }

    /// A new page: the lowest free page, or one past the end. Its bytes are
    /// zeroed unless `zeroed` is false, for a caller that overwrites them
    /// all (formatting a node zeroes it whole).
    func allocate(zeroed: Bool = true) throws -> (UInt32, Page) {
        let number: UInt32
        if let free = freelist.allocate() {
            number = free
        } else {
            guard header.pageCount < UInt32.max - 1 else {
                throw StorageError.diskFull(path: db.path + " (the store reached 2^32 pages)")
            }
            number = header.pageCount
            header.pageCount += 1
        }
        let page = zeroed ? Page.zeroed(db.pageSize) : Page.uninitialized(db.pageSize)
        dirty[number] = page
        shape &+= 1
        return (number, page)
    }

    /// Returns a page to the freelist. Its content no longer matters, so it
    /// is not written at commit.
    func free(_ number: UInt32) {
        shape &+= 1
        dirty.remove(number)
        freelist.free(number)
    }
}
