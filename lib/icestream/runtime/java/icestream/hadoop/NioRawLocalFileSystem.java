package icestream.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, setting permissions with java.nio instead of a child process.
 *
 * Without Hadoop's native library (pip's pyspark has none) RawLocalFileSystem runs the chmod
 * program for every file and folder it creates: about 20 ms of a large JVM's CPU each, measured
 * on the ingest's commits. Modes with bits beyond rwxrwxrwx (sticky, setuid) still go the old way.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
    // Bit i of a POSIX mode, from the lowest: others x, w, r, group x, w, r, owner x, w, r.
    private static final PosixFilePermission[] BITS = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
        PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    public void setPermission(Path path, FsPermission permission) throws IOException {
        int mode = permission.toShort();
        if ((mode & ~0777) != 0) {
            super.setPermission(path, permission);
            return;
        }
        Set<PosixFilePermission> granted = EnumSet.noneOf(PosixFilePermission.class);
        for (int bit = 0; bit < BITS.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                granted.add(BITS[bit]);
            }
        }
        Files.setPosixFilePermissions(pathToFile(path).toPath(), granted);
    }
}
