package icestream.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/** The checksummed local file system (Hadoop's default for file:) over {@link NioRawLocalFileSystem}. */
public class NioLocalFileSystem extends LocalFileSystem {
    public NioLocalFileSystem() {
        super(new NioRawLocalFileSystem());
    }
}
