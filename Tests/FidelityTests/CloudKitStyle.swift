// The CloudKit-compatible style: every attribute has a default, every
// relationship is optional, to-many relationships are `[T]?` on both sides
// of a many-to-many, and one is an implicitly unwrapped `[T]!`.
import Foundation
import Strata

@Model
final class Note {
    var title: String = ""
    var body: String = ""
    var createdAt: Date = Date.now
    var pinned: Bool = false
    var tags: [Tag]? = []
    var folder: Folder?

    init(title: String = "", body: String = "") {
        self.title = title
        self.body = body
    }
}

@Model
final class Tag {
    var name: String = ""
    @Relationship(inverse: \Note.tags) var notes: [Note]? = []

    init(name: String) { self.name = name }
}

@Model
final class Folder {
    var name: String = ""
    @Relationship(deleteRule: .cascade, inverse: \Note.folder)
    var notes: [Note]! = []

    init(name: String) { self.name = name }
}
