/// The main file's read mapping, seen from the handle.
extension Database {
    /// Drops the pages of the main file's mapping from this process's
    /// resident memory (`madvise(MADV_DONTNEED)`); nothing else changes.
    ///
    /// Mapped pages that reads touched stay resident until the kernel needs
    /// the memory, and they count in the process's RSS — more than were
    /// read, since a fault maps the neighbouring pages too. A pass over much
    /// of a large store (an enumeration, a full scan) can call this as it
    /// goes to keep the process small: pages still in use fault back in
    /// from the OS page cache. Enumerating a million objects kept a
    /// 140 MiB file resident without it. A no-op when the store is not
    /// mapped.
    public func discardMappedPages() {
        let region = stateLock.withLock { pager.mapped?.region }
        region?.discardResidentPages()
    }

    /// 64 MiB; tests lower it to make a small store outgrow its mapping.
    package static var minimumMappingLength: Int {
        get { Pager.minimumMappingLength }
        set { Pager.minimumMappingLength = newValue }
    }
}
